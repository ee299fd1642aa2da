# Sourced by the scripts that install a Debian package the tests need (zookeeper.sh,
# chromium.sh); the sourcing script defines log().
#
#   as_root CMD...          run CMD as root (directly, or through sudo)
#   apt_install PACKAGE     install PACKAGE non-interactively without recommends, refreshing
#                           the package lists and retrying once when the first try fails

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    log "installing needs root (or sudo): $*"
    return 1
  fi
}

apt_install() {
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -y -q -o Dpkg::Use-Pty=0
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
  log "installing the Debian package $1"
  if ! as_root "${apt[@]}" install --no-install-recommends "$1"; then
    log "install failed; refreshing the package lists and retrying"
    as_root "${apt[@]}" update
    as_root "${apt[@]}" install --no-install-recommends "$1"
  fi
}
