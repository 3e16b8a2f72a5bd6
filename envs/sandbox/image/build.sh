#!/usr/bin/env bash
# Build the docker sandbox image: a minimal Debian (debootstrap) with python3, numpy and psutil,
# plus the evalplus package copied from the project's venv, then `docker import`ed.
#
#   sh envs/sandbox/image/build.sh [PYTHON]      (root; needs debootstrap, docker and a Debian mirror)
#
# Env: LOPD_SANDBOX_IMAGE (tag, default lopd-sandbox:1), DEBIAN_MIRROR, DEBIAN_SUITE, FORCE=1 to rebuild.
set -euo pipefail
PYTHON="${1:-.venv/bin/python}"
IMAGE="${LOPD_SANDBOX_IMAGE:-lopd-sandbox:1}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE="${DEBIAN_SUITE:-bookworm}"
# Bump when the image contents change; the docker backend refuses images with another version.
IMAGE_VERSION=1

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
    have=$(docker image inspect -f '{{ index .Config.Labels "lopd.sandbox.version" }}' "$IMAGE" 2>/dev/null || true)
    if [ "$have" = "$IMAGE_VERSION" ]; then
        echo "sandbox image $IMAGE (version $IMAGE_VERSION) already present; FORCE=1 rebuilds"
        exit 0
    fi
fi
command -v debootstrap >/dev/null || { echo "debootstrap not found: apt-get install -y debootstrap" >&2; exit 1; }
command -v docker >/dev/null || { echo "docker not found: apt-get install -y docker.io" >&2; exit 1; }
EVALPLUS_DIR=$("$PYTHON" -c 'import os, evalplus; print(os.path.dirname(evalplus.__file__))')

ROOTFS=$(mktemp -d /tmp/lopd-rootfs.XXXXXX)
trap 'rm -rf "$ROOTFS"' EXIT
debootstrap --variant=minbase --include=python3,python3-numpy,python3-psutil \
    "$SUITE" "$ROOTFS" "$MIRROR"
SITE="$ROOTFS/usr/local/lib/python3.11/dist-packages"
mkdir -p "$SITE"
cp -r "$EVALPLUS_DIR" "$SITE/evalplus"
find "$SITE/evalplus" -name __pycache__ -prune -exec rm -rf {} +
# Nothing below is needed to run Python; dropping it keeps the image small.
rm -rf "$ROOTFS"/var/cache/apt/* "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/usr/share/doc/* \
       "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/locale/* "$ROOTFS"/var/log/*
chroot "$ROOTFS" /usr/bin/python3 -c 'import evalplus.eval, numpy, psutil; print("image python ok")'
tar -C "$ROOTFS" -c . | docker import \
    --change "LABEL lopd.sandbox.version=$IMAGE_VERSION" \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    --change 'CMD ["/usr/bin/python3"]' - "$IMAGE"
echo "built $IMAGE"
