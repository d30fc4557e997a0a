"""Push an OCI image layout to a registry by digest (OCI distribution spec), standard library only.

    python push.py <layout dir> <registry host[:port]> <repository> [--tag TAG ...] [--plain-http]

Blobs the registry already has (HEAD 200) are not uploaded again: a layer shared with an image
pushed before costs one HEAD request. Each blob is uploaded with POST + a monolithic PUT
(`?digest=`), then the manifest is PUT by its digest (so what the registry stores is
exactly the bytes the build made), then under each tag. An image index (oci/index.py) is pushed
as each image it names, by digest, then the index. Prints one JSON line:
{"reference": "<registry>/<repo>@sha256:...", "uploaded_bytes": N, "skipped_bytes": M, ...}.

Credentials, if the registry asks (401): LOCALAI_REGISTRY_USER / LOCALAI_REGISTRY_PASSWORD
(basic auth, or exchanged for a bearer token at the realm the registry names), or
LOCALAI_REGISTRY_TOKEN (a bearer token). It runs as `pants publish`'s process (publish.py).
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"



class PushError(RuntimeError):
    pass


class Registry:
    def __init__(self, host: str, repository: str, plain_http: bool):
        self.base = f"{'http' if plain_http else 'https'}://{host}"
        self.host, self.repository = host, repository
        self.auth: str | None = None
        token = os.environ.get("LOCALAI_REGISTRY_TOKEN")
        if token:
            self.auth = f"Bearer {token}"

    def _basic(self) -> str | None:
        user, password = os.environ.get("LOCALAI_REGISTRY_USER"), os.environ.get("LOCALAI_REGISTRY_PASSWORD")
        if not user:
            return None
        return "Basic " + base64.b64encode(f"{user}:{password or ''}".encode()).decode()

    def _login(self, challenge: str) -> None:
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() == "basic":
            self.auth = self._basic()
        elif scheme.lower() == "bearer":
            fields = dict(
                (k.strip(), v.strip('"')) for k, v in (p.split("=", 1) for p in params.split(",") if "=" in p)
            )
            query = {k: v for k, v in fields.items() if k in ("service", "scope")}
            query.setdefault("scope", f"repository:{self.repository}:pull,push")
            req = urllib.request.Request(fields["realm"] + "?" + urllib.parse.urlencode(query))
            basic = self._basic()
            if basic:
                req.add_header("Authorization", basic)
            with urllib.request.urlopen(req, timeout=60) as r:
                body = json.load(r)
            self.auth = f"Bearer {body.get('token') or body['access_token']}"
        if not self.auth:
            raise PushError(
                f"{self.host} asks for credentials ({challenge}); set LOCALAI_REGISTRY_USER and "
                "LOCALAI_REGISTRY_PASSWORD, or LOCALAI_REGISTRY_TOKEN"
            )

    def request(self, method: str, url: str, data=None, headers=None, ok=(200, 201, 202, 204), retry=True):
        if url.startswith("/"):
            url = self.base + url
        req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
        if self.auth:
            req.add_header("Authorization", self.auth)
        try:
            with urllib.request.urlopen(req, timeout=600) as r:
                r.read()
                return r.status, r.headers
        except urllib.error.HTTPError as e:
            if e.code == 401 and retry:
                self._login(e.headers.get("WWW-Authenticate", ""))
                if hasattr(data, "seek"):
                    data.seek(0)
                return self.request(method, url, data, headers, ok, retry=False)
            if e.code in ok or (method == "HEAD" and e.code == 404):
                return e.code, e.headers
            raise PushError(f"{method} {url}: HTTP {e.code} {e.reason}: {e.read()[:500]!r}") from e
        except urllib.error.URLError as e:
            raise PushError(
                f"{method} {url}: {e.reason}. Is the registry up, and is it https (else pass --plain-http)?"
            ) from e

    def has_blob(self, digest: str) -> bool:
        status, _ = self.request("HEAD", f"/v2/{self.repository}/blobs/{digest}")
        return status == 200

    def upload_blob(self, path: Path, digest: str) -> None:
        _, headers = self.request("POST", f"/v2/{self.repository}/blobs/uploads/", data=b"")
        location = headers["Location"]
        if location.startswith("/"):
            location = self.base + location
        sep = "&" if "?" in location else "?"
        with path.open("rb") as f:
            self.request(
                "PUT",
                f"{location}{sep}digest={urllib.parse.quote(digest)}",
                data=f,
                headers={"Content-Type": "application/octet-stream", "Content-Length": str(path.stat().st_size)},
            )

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> None:
        self.request("PUT", f"/v2/{self.repository}/manifests/{reference}", data=body, headers={"Content-Type": media_type})


def _blob(layout: Path, digest: str) -> bytes:
    body = (layout / "blobs/sha256" / digest.split(":")[1]).read_bytes()
    if "sha256:" + hashlib.sha256(body).hexdigest() != digest:
        raise PushError(f"{layout}: the manifest blob does not match {digest}; rebuild with ./pants package")
    return body


def _push_image(registry: Registry, layout: Path, digest: str, body: bytes, media_type: str) -> tuple[int, int]:
    """The manifest's blobs (those the registry lacks), then the manifest by digest: (uploaded, skipped) bytes."""
    manifest = json.loads(body)
    uploaded = skipped = 0
    for blob in [manifest["config"], *manifest["layers"]]:
        path = layout / "blobs/sha256" / blob["digest"].split(":")[1]
        if registry.has_blob(blob["digest"]):
            skipped += blob["size"]
        else:
            registry.upload_blob(path, blob["digest"])
            uploaded += blob["size"]
    registry.put_manifest(digest, body, media_type)
    return uploaded, skipped


def push(layout: Path, host: str, repository: str, tags: list[str], plain_http: bool) -> dict:
    """The layout's one image, or its one image index: each image it names by digest, then the index."""
    index = json.loads((layout / "index.json").read_text())
    desc = index["manifests"][0]
    digest, media_type = desc["digest"], desc["mediaType"]
    body = _blob(layout, digest)
    is_index = media_type == MEDIA_INDEX
    images = [(m["digest"], m["mediaType"]) for m in json.loads(body)["manifests"]] if is_index else [(digest, media_type)]
    bodies = {d: _blob(layout, d) for d, _ in images}  # every manifest checked before anything is pushed
    registry = Registry(host, repository, plain_http)
    uploaded = skipped = 0
    for d, mt in images:
        up, skip = _push_image(registry, layout, d, bodies[d], mt)
        uploaded, skipped = uploaded + up, skipped + skip
    if is_index:
        registry.put_manifest(digest, body, media_type)
    for tag in tags:
        registry.put_manifest(tag, body, media_type)
    return {
        "reference": f"{host}/{repository}@{digest}",
        "tags": [f"{host}/{repository}:{t}" for t in tags],
        "uploaded_bytes": uploaded,
        "skipped_bytes": skipped,
        "manifest_bytes": len(body),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layout", type=Path)
    parser.add_argument("registry", help="host[:port]")
    parser.add_argument("repository")
    parser.add_argument("--tag", action="append", default=[])
    parser.add_argument("--plain-http", action="store_true")
    args = parser.parse_args(argv)
    try:
        result = push(args.layout, args.registry, args.repository, args.tag, args.plain_http)
    except PushError as e:
        print(f"push of {args.layout} to {args.registry}/{args.repository} failed: {e}", file=sys.stderr)
        return 1
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
