#!/usr/bin/env bash
# Installs the system programs the tests and the picture commands use, when they are missing:
# Graphviz (`dot`: chakra viz graph to SVG/PDF/PNG), Chromium and ChromeDriver (the HTML report is
# opened headless in a test), a font for matplotlib, and the protobuf runtime ASTRA-sim's binaries in
# ../shared/astra-sim link (the tests run the real consumer). Debian package names; needs root or sudo.
# Run by `make` before the virtualenv is built; does nothing when everything is there.
set -euo pipefail

declare -A PACKAGE_OF=([dot]=graphviz [chromium]=chromium [chromedriver]=chromium-driver)
missing=()
for program in "${!PACKAGE_OF[@]}"; do
    command -v "$program" >/dev/null 2>&1 || missing+=("${PACKAGE_OF[$program]}")
done
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
ldconfig -p 2>/dev/null | grep -q 'libprotobuf\.so\.32 ' || missing+=(libprotobuf32)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    run=()
elif command -v sudo >/dev/null 2>&1; then
    run=(sudo)
else
    echo "system_deps: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "system_deps: missing ${missing[*]} and no apt-get here; install them with your package manager" >&2
    exit 1
fi
echo "system_deps: installing ${missing[*]}" >&2
"${run[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${run[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
