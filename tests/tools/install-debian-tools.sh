#!/bin/sh
# Installs the Debian tools the integration tests need, when they are missing:
#   docker-registry  the CNCF distribution registry (a real OCI registry for the publish and
#                    LocalAI-installer tests)
#   skopeo           an independent reader of the image tarball (oci-archive: and docker-archive:)
#   postgresql       the database BuildGrid 0.9.1's scheduler requires (remote execution test;
#                    tests/integration/postgres.py runs a private cluster, not the system service)
#   espeak-ng        speech for the VAD tests (utterances with short pauses, test_whisper_cpp_cpu.py)
#   qemu-user-static qemu-aarch64-static: runs linux/arm64 artifacts on x86_64 (binfmt_misc is
#                    not mounted in these containers: the tests call it explicitly)
#   debootstrap      downloads Debian's arm64 packages for the aarch64 CPython those tests run
#   openssl          makes the signing keys of the provenance-signing test (package/signing_rule_test.py)
#                    and checks its DSSE signatures independently of the signer's cryptography
#   git              the git repository of the direct-reference test (test_localai_direct_references.py)
#   bubblewrap       the sandbox of the remote execution test's workers (a mount namespace per action)
# Test-only: the build itself needs none of them. Called by the tests (registry.py) and by
# .ci/run. Needs root or sudo and a Debian/Ubuntu apt source; anywhere else, install the
# equivalent package (e.g. `distribution`/`registry`) and put `docker-registry` on PATH.
set -eu
missing=""
command -v docker-registry >/dev/null 2>&1 || missing="$missing docker-registry"
command -v skopeo >/dev/null 2>&1 || missing="$missing skopeo"
# Debian keeps initdb/pg_ctl in /usr/lib/postgresql/<version>/bin, off PATH.
command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$missing postgresql"
command -v espeak-ng >/dev/null 2>&1 || missing="$missing espeak-ng"
command -v qemu-aarch64-static >/dev/null 2>&1 || missing="$missing qemu-user-static"
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing="$missing debootstrap"
command -v openssl >/dev/null 2>&1 || missing="$missing openssl"
command -v git >/dev/null 2>&1 || missing="$missing git"
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-debian-tools.sh: missing$missing and no apt-get here; install the CNCF distribution registry (as docker-registry), skopeo, PostgreSQL (initdb, pg_ctl), espeak-ng, qemu-user-static, debootstrap, openssl, git and bubblewrap" >&2
    exit 1
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y --no-install-recommends $missing >/dev/null 2>&1 || {
    $sudo apt-get update -q >/dev/null
    $sudo apt-get install -y --no-install-recommends $missing
}
echo "installed:$missing"
