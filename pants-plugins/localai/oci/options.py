"""[localai-oci]: where backend images are published, shared by publish, gallery and bundle."""
from __future__ import annotations

from pants.option.option_types import BoolOption, StrListOption, StrOption
from pants.option.subsystem import Subsystem
from pants.util.strutil import help_text


class OciSubsystem(Subsystem):
    options_scope = "localai-oci"
    help = "The OCI registry that `pants publish` pushes backend images to and the gallery names."

    registry = StrOption(
        default="",
        help="host[:port] of the registry, e.g. quay.io or 127.0.0.1:5000. Empty: `publish` skips images.",
    )
    repository = StrOption(
        default="local-ai-backends",
        help="Repository (path) in the registry that holds every backend image, e.g. go-skynet/local-ai-backends.",
    )
    mirrors = StrListOption(
        default=[],
        help=help_text(
            """
            Other `host[:port]/repository` locations holding the same images (pushed there by
            you or by registry replication); the gallery lists them as `mirrors`, by digest.
            """
        ),
    )
    tag_prefix = StrOption(
        default="latest-",
        help=help_text(
            """
            `publish` also tags each image `<prefix><entry>` (LocalAI's names, e.g.
            latest-cpu-silero-vad), for people who browse the registry; the gallery always uses
            the digest. Empty: no tag.
            """
        ),
    )
    tarball = BoolOption(
        default=False,
        help=help_text(
            """
            Also write `dist/images/<name>/<accel>/image.oci.tar` in `pants package` (the layout as
            one tarball: an OCI layout archive and a `docker save` archive). Off: the layout/
            folder holds the same blobs, and `pants localai-bundle` writes the tarballs it needs
            from it (or `python3 pants-plugins/localai/oci/scripts/layout.py tarball <layout> <file>`);
            writing and capturing the whole image again on every edit is most of an edit loop's time.
            """
        ),
    )
    plain_http = BoolOption(
        default=False,
        help="Talk HTTP, not HTTPS, to the registry (registries on localhost/127.0.0.1 always use HTTP).",
    )

    def reference(self) -> str:
        return f"{self.registry.rstrip('/')}/{self.repository.strip('/')}"

    def use_plain_http(self) -> bool:
        host = self.registry.split(":")[0]
        return self.plain_http or host in ("localhost", "127.0.0.1")
