# Sourced by the scripts that install a Debian package klog or its tests need (zookeeper.sh,
# chromium.sh, isal.sh, kcat.sh); the sourcing script defines log().
#
#   as_root CMD...          run CMD as root (directly, or through sudo)
#   apt_install PACKAGE     install PACKAGE non-interactively without recommends, refreshing
#                           the package lists and retrying once when the first try fails
#   install_package PACKAGE WHAT
#                           apt_install PACKAGE unless is_installed (the sourcing script's) holds

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

# install_package PACKAGE WHAT: when is_installed (defined by the sourcing script) fails,
# installs PACKAGE with apt and checks again; WHAT says what is expected, for the messages.
install_package() {
  local package=$1 what=$2
  if is_installed; then
    log "$package is already installed ($what)"
    return 0
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    log "apt-get not found: install $package by hand ($what expected)"
    return 1
  fi
  apt_install "$package"
  is_installed || { log "the package $package installed but $what is missing"; return 1; }
  log "installed $package"
}
