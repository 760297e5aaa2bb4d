#!/usr/bin/env bash
# The tests drive a real OpenSSH sshd and a real terminal (tmux). Install them when missing and
# we can (root + apt); otherwise say exactly what to install.
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
  # The prometheus package ships a service: never let it start (or start at boot) here; the
  # tests run their own instance on a free loopback port. policy-rc.d 101 = "do not start".
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy"
    trap 'rm -f "$policy"' EXIT
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" "${optional[@]}" >/dev/null
  if [[ " ${missing[*]} " == *" prometheus "* ]]; then
    if [ -d /run/systemd/system ]; then
      systemctl disable --now prometheus >/dev/null 2>&1 || true
    else
      update-rc.d prometheus disable >/dev/null 2>&1 || true
    fi
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
