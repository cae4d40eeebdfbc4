#!/usr/bin/env bash
# Packs the PCRE2 and ICU headers + shared libraries of this Debian 12 machine into
# .devdeps/devdeps.tar.xz for GPU images that lack the -dev packages (see gpu_session.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download libpcre2-dev libpcre2-8-0 libpcre2-posix3 libicu-dev libicu72 >/dev/null)
mkdir "$tmp/x"
for f in "$tmp"/*.deb; do dpkg -x "$f" "$tmp/x"; done
(cd "$tmp/x" && find . -name '*.a' -delete && rm -rf usr/share usr/bin usr/sbin &&
  rm -f usr/lib/x86_64-linux-gnu/libicu{i18n,io,test,tu}* && rm -rf usr/lib/x86_64-linux-gnu/icu)
mkdir -p .devdeps
tar cJf .devdeps/devdeps.tar.xz -C "$tmp/x" .
rm -rf "$tmp"
grep -q '^/.devdeps/' .git/info/exclude || echo '/.devdeps/' >>.git/info/exclude
ls -la .devdeps/devdeps.tar.xz
