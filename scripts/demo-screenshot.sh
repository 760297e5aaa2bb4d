#!/usr/bin/env bash
# A screenshot of the real demo: `vllm-console demo` in a private tmux server of the given size,
# saved by Textual itself (TEXTUAL_SCREENSHOT) once the checks and a few acceptance samples are
# in. The README's is the default:
#   scripts/demo-screenshot.sh [OUT.svg] [SECONDS] [COLUMNSxROWS]
#   (default docs/demo-120x36.svg, 15 s, 120x36)
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(realpath -m "${1:-docs/demo-120x36.svg}")"
delay="${2:-15}"
size="${3:-120x36}"
mkdir -p "$(dirname "$out")"
socket="vc-screenshot-$$"
trap 'tmux -L "$socket" kill-server 2>/dev/null || true' EXIT
tmux -L "$socket" -f /dev/null new-session -d -x "${size%x*}" -y "${size#*x}" \
  "env TERM=xterm-256color COLORTERM=truecolor TEXTUAL_SCREENSHOT=$delay \
   TEXTUAL_SCREENSHOT_LOCATION=$(dirname "$out") TEXTUAL_SCREENSHOT_FILENAME=$(basename "$out") \
   .venv/bin/vllm-console demo"
# The app saves the screenshot, then exits; the demo then stops its simulated host.
for _ in $(seq $((delay + 30))); do
  tmux -L "$socket" has-session 2>/dev/null || break
  sleep 1
done
test -s "$out" && echo "wrote $out"
