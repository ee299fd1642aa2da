# Sourced by the scripts that install a Debian package klog or its tests need (zookeeper.sh,
# chromium.sh, isal.sh, kcat.sh); the sourcing script defines log().
#
#   as_root CMD...          run CMD as root (directly, or through sudo)
#   apt_install PACKAGE     install PACKAGE non-interactively without recommends, refreshing
#                           the package lists and retrying once when the first try fails
#   install_package PACKAGE WHAT
#                           apt_install PACKAGE unless is_installed (the sourcing script's) holds
#   package_command PACKAGE BIN VERSION_FLAG install|status
#                           the whole command of a script whose package is one executable BIN

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

# package_command PACKAGE BIN VERSION_FLAG install|status: the `install` and `status` commands of
# a script whose Debian package brings one executable, BIN. `install` installs PACKAGE unless BIN
# is there; `status` prints BIN and the first line of `BIN VERSION_FLAG` (exit 0), or says it is
# missing (exit 3); anything else prints the usage (exit 2).
package_command() {
  local package=$1 bin=$2 version_flag=$3
  is_installed() { [ -x "$bin" ]; }
  case "${4:-}" in
    install) install_package "$package" "$bin" ;;
    status)
      if is_installed; then
        echo "$bin: $("$bin" "$version_flag" 2>/dev/null | head -1 || echo "version unknown")"
        return 0
      fi
      echo "not installed ($bin missing): run '$0 install'"
      return 3
      ;;
    *)
      echo "usage: $0 install|status" >&2
      return 2
      ;;
  esac
}
