#!/usr/bin/env bash
# The tests drive a real OpenSSH sshd, a real terminal (tmux), a real Prometheus and a real Docker
# daemon. Install them when missing and we can (root + apt); otherwise say exactly what to install.
set -euo pipefail

missing=()
sshd_ok=0
for p in /usr/sbin/sshd /usr/local/sbin/sshd; do [ -x "$p" ] && sshd_ok=1; done
command -v sshd >/dev/null 2>&1 && sshd_ok=1
[ "$sshd_ok" = 1 ] || missing+=(openssh-server)
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
[ -x /usr/bin/python3 ] || missing+=(python3)
# The fleet tests and benchmark run their own Prometheus (and promtool for backfilled blocks).
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || missing+=(prometheus)
# The container tier starts its own dockerd (own socket and data dir) and a compose service.
{ command -v dockerd && command -v docker; } >/dev/null 2>&1 || missing+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
# Optional: the completion scripts are proven in these shells, skipped (saying so) without them.
optional=()
command -v zsh >/dev/null 2>&1 || optional+=(zsh)
command -v fish >/dev/null 2>&1 || optional+=(fish)

if [ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} ${optional[*]} (apt-get)"
  apt-get update -qq
  # The prometheus and docker.io packages (and containerd) ship services: never let them start
  # (or start at boot) here; the tests run their own instances on a free loopback port or a
  # private socket. policy-rc.d 101 = "do not start".
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" "${optional[@]}" >/dev/null
  never_at_boot() {
    if [ -d /run/systemd/system ]; then
      systemctl disable --now "$@" >/dev/null 2>&1 || true
    else
      for service in "$@"; do update-rc.d "$service" disable >/dev/null 2>&1 || true; done
    fi
  }
  if [[ " ${missing[*]} " == *" prometheus "* ]]; then never_at_boot prometheus; fi
  if [[ " ${missing[*]} " == *" docker.io "* ]]; then
    never_at_boot docker.socket docker containerd
  fi
  exit 0
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "not installed: ${optional[*]} (their completion tests are skipped)" >&2
  exit 0
fi
echo "The tests need: ${missing[*]}." >&2
echo "Install them, e.g.: sudo apt-get install ${missing[*]}" >&2
exit 1
