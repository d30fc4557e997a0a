"""LocalAI's gRPC wire interface as data: read it, render it, compare two versions.

One shape for the wire facts, used everywhere (``wire_facts.json`` is its committed copy):

    {"package": "backend", "service": "Backend",
     "rpcs": [{"name", "request", "response", "client_streaming", "server_streaming"}],
     "enums": [{"name", "values": [[NAME, number], ...]}],
     "messages": [{"name", "enums": [...], "fields": [{"number", "name", "type"}]}]}

A field's ``type`` is written as LocalAI's facts file writes it: ``string``,
``optional float``, ``repeated TranscriptWord``, ``map<string, string>``,
``oneof payload: TranscriptLiveConfig``; an enum nested in a message is named
``Message.Enum``.

Command line (CPython with protobuf and grpcio-tools):
  python -m backends.proto.wire render FACTS.json            > backend.proto
  python -m backends.proto.wire import-md FACTS.md           > FACTS.json
  python -m backends.proto.wire diff OURS.proto THEIRS.proto   (exit 1 if wire-incompatible)
"""
from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

SCALARS = {
    1: "double", 2: "float", 3: "int64", 4: "uint64", 5: "int32", 6: "fixed64", 7: "fixed32",
    8: "bool", 9: "string", 12: "bytes", 13: "uint32", 15: "sfixed32", 16: "sfixed64",
    17: "sint32", 18: "sint64",
}
TYPE_MESSAGE, TYPE_ENUM = 11, 14
LABEL_REPEATED = 3


# ---- reading ----------------------------------------------------------------------------
def compile_descriptor(proto_path: Path):
    """The FileDescriptorProto of one .proto file, compiled with grpcio-tools' protoc."""
    import grpc_tools
    from google.protobuf import descriptor_pb2
    from grpc_tools import protoc

    proto_path = Path(proto_path).resolve()
    if not proto_path.is_file():
        raise ValueError(f"{proto_path}: no such file")
    well_known = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/*.proto
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.pb"
        code = protoc.main(
            ["protoc", f"-I{proto_path.parent}", f"-I{well_known}", f"--descriptor_set_out={out}", proto_path.name]
        )
        if code != 0:
            raise ValueError(f"{proto_path}: protoc failed (exit {code}); its errors are printed above")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
    return files[0]


def facts_from_descriptor(fd) -> dict:
    """The wire facts of a compiled FileDescriptorProto (first service only)."""
    package = fd.package

    def short(type_name: str) -> str:
        return type_name[len(package) + 2 :] if type_name.startswith(f".{package}.") else type_name.lstrip(".")

    def enum_facts(enum, prefix=""):
        return {"name": prefix + enum.name, "values": [[v.name, v.number] for v in enum.value]}

    def field_type(msg, field) -> str:
        if field.type in (TYPE_MESSAGE, TYPE_ENUM):
            base = short(field.type_name)
        else:
            base = SCALARS[field.type]
        if field.type == TYPE_MESSAGE and field.label == LABEL_REPEATED:
            entry = next((n for n in msg.nested_type if f"{msg.name}.{n.name}" == base), None)
            if entry is not None and entry.options.map_entry:
                key, value = (field_type(entry, f) for f in entry.field)
                return f"map<{key}, {value}>"
        if field.label == LABEL_REPEATED:
            return f"repeated {base}"
        if field.proto3_optional:
            return f"optional {base}"
        if field.HasField("oneof_index"):
            return f"oneof {msg.oneof_decl[field.oneof_index].name}: {base}"
        return base

    messages = []
    for msg in fd.message_type:
        messages.append(
            {
                "name": msg.name,
                "enums": [enum_facts(e, f"{msg.name}.") for e in msg.enum_type],
                "fields": [
                    {"number": f.number, "name": f.name, "type": field_type(msg, f)} for f in msg.field
                ],
            }
        )
    service = fd.service[0] if fd.service else None
    rpcs = [
        {
            "name": m.name,
            "request": short(m.input_type),
            "response": short(m.output_type),
            "client_streaming": m.client_streaming,
            "server_streaming": m.server_streaming,
        }
        for m in (service.method if service else [])
    ]
    return {
        "package": package,
        "service": service.name if service else "",
        "rpcs": rpcs,
        "enums": [enum_facts(e) for e in fd.enum_type],
        "messages": messages,
    }


def facts_from_proto(proto_path: Path) -> dict:
    return facts_from_descriptor(compile_descriptor(proto_path))


_RPC_ROW = re.compile(r"^\| (\w+) \| (stream )?(\w+) \| (stream )?(\w+) \|$")
_FIELD = re.compile(r"^- (\d+): (\w+) \((.+)\)$")
_NESTED_ENUM = re.compile(r"^- enum (\w+): (.+)$")


def _enum_values(text: str) -> list:
    return [[name.strip(), int(number)] for name, number in (v.split("=") for v in text.split(","))]


def facts_from_markdown(text: str) -> dict:
    """The wire facts from LocalAI's facts file (shared/reference/localai-backend-proto.md)."""
    facts = {"package": "", "service": "", "rpcs": [], "enums": [], "messages": []}
    package = re.search(r"package `(\w+)`", text)
    facts["package"] = package.group(1) if package else ""
    current = None
    for line in text.splitlines():
        if line.startswith("## service "):
            facts["service"] = line.split()[2]
            current = None
        elif line.startswith("## enum "):
            current = {"name": line.split()[2], "values": []}
            facts["enums"].append(current)
        elif line.startswith("## message "):
            current = {"name": line.split()[2], "enums": [], "fields": []}
            facts["messages"].append(current)
        elif (row := _RPC_ROW.match(line)) and row.group(1) != "rpc":
            facts["rpcs"].append(
                {
                    "name": row.group(1),
                    "request": row.group(3),
                    "response": row.group(5),
                    "client_streaming": bool(row.group(2)),
                    "server_streaming": bool(row.group(4)),
                }
            )
        elif current is None or not line.startswith("- ") or line == "- (no fields)":
            continue
        elif "values" in current:
            current["values"].extend(_enum_values(line[2:]))
        elif nested := _NESTED_ENUM.match(line):
            current["enums"].append(
                {"name": f"{current['name']}.{nested.group(1)}", "values": _enum_values(nested.group(2))}
            )
        elif field := _FIELD.match(line):
            current["fields"].append(
                {"number": int(field.group(1)), "name": field.group(2), "type": field.group(3)}
            )
        else:
            raise ValueError(f"facts file: cannot read line {line!r}")
    # A nested enum is named Message.Enum; the facts file names it Enum inside its message.
    for msg in facts["messages"]:
        nested = {e["name"].split(".", 1)[1]: e["name"] for e in msg["enums"]}
        for f in msg["fields"]:
            if f["type"] in nested:
                f["type"] = nested[f["type"]]
    return facts


# ---- rendering --------------------------------------------------------------------------
HEADER = """\
// LocalAI backend gRPC interface, wire-identical to LocalAI's backend/backend.proto.
//
// Rendered from backends/proto/wire_facts.json by `python -m backends.proto.wire render`:
// every RPC, message, enum, field name, number and type is LocalAI's, so LocalAI talks to
// every backend this repository builds. backends/proto/wire_test.py pins it to the facts.
// Generated code (backend_pb2*.py) is produced at build time and never committed.
"""


def render_proto(facts: dict) -> str:
    out = [HEADER, 'syntax = "proto3";', "", f"package {facts['package']};", ""]
    out.append(f"service {facts['service']} {{")
    for r in facts["rpcs"]:
        req = ("stream " if r["client_streaming"] else "") + r["request"]
        resp = ("stream " if r["server_streaming"] else "") + r["response"]
        out.append(f"  rpc {r['name']}({req}) returns ({resp}) {{}}")
    out += ["}", ""]

    def enum_lines(enum, indent):
        name = enum["name"].rsplit(".", 1)[-1]
        lines = [f"{indent}enum {name} {{"]
        lines += [f"{indent}  {value} = {number};" for value, number in enum["values"]]
        return lines + [f"{indent}}}"]

    for enum in facts["enums"]:
        out += enum_lines(enum, "") + [""]
    for msg in facts["messages"]:
        out.append(f"message {msg['name']} {{")
        for enum in msg["enums"]:
            out += enum_lines(enum, "  ")
        open_oneof = None
        for f in msg["fields"]:
            kind = f["type"]
            oneof = re.match(r"oneof (\w+): (.+)$", kind)
            if open_oneof and (not oneof or oneof.group(1) != open_oneof):
                out.append("  }")
                open_oneof = None
            if oneof:
                if open_oneof is None:
                    open_oneof = oneof.group(1)
                    out.append(f"  oneof {open_oneof} {{")
                out.append(f"    {_local(oneof.group(2), msg)} {f['name']} = {f['number']};")
                continue
            out.append(f"  {_local(kind, msg)} {f['name']} = {f['number']};")
        if open_oneof:
            out.append("  }")
        out += ["}", ""]
    return "\n".join(out)


def _local(kind: str, msg: dict) -> str:
    """A type as written inside ``msg``: its own nested enums by their short name."""
    prefix = f"{msg['name']}."
    return " ".join(part[len(prefix):] if part.startswith(prefix) else part for part in kind.split(" "))


# ---- comparing --------------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    kind: str  # "added", "removed" or "changed"
    what: str  # e.g. "rpc Detect", "field TranscriptWord.text"
    detail: str
    breaking: bool

    def __str__(self) -> str:
        mark = {"added": "+", "removed": "-", "changed": "~"}[self.kind]
        tag = "  (wire-incompatible)" if self.breaking else ""
        return f"{mark} {self.what}: {self.detail}{tag}"


def _rpc_text(r: dict) -> str:
    req = ("stream " if r["client_streaming"] else "") + r["request"]
    resp = ("stream " if r["server_streaming"] else "") + r["response"]
    return f"({req}) returns ({resp})"


def _field_text(f: dict) -> str:
    return f"{f['number']} {f['type']} {f['name']}"


def diff(ours: dict, theirs: dict) -> list:
    """What changes when going from ``ours`` to ``theirs``.

    Additions are compatible. Removals, and any change of an RPC's shape or of a field's
    number, type or name, are wire-incompatible: LocalAI's code addresses fields by name
    and peers decode by number and type.
    """
    changes = []

    def compare(kind: str, old: dict, new: dict, text, same=None):
        same = same or (lambda a, b: text(a) == text(b))
        for name in new.keys() - old.keys():
            changes.append(Change("added", f"{kind} {name}", text(new[name]), False))
        for name in old.keys() - new.keys():
            changes.append(Change("removed", f"{kind} {name}", text(old[name]), True))
        for name in old.keys() & new.keys():
            if not same(old[name], new[name]):
                changes.append(Change("changed", f"{kind} {name}", f"{text(old[name])} -> {text(new[name])}", True))

    for key in ("package", "service"):
        if ours[key] != theirs[key]:
            changes.append(Change("changed", key, f"{ours[key]} -> {theirs[key]}", True))
    compare("rpc", {r["name"]: r for r in ours["rpcs"]}, {r["name"]: r for r in theirs["rpcs"]}, _rpc_text)

    def enums(facts):
        found = {e["name"]: e for e in facts["enums"]}
        found.update({e["name"]: e for m in facts["messages"] for e in m["enums"]})
        return found

    old_enums, new_enums = enums(ours), enums(theirs)
    compare("enum", old_enums, new_enums, lambda e: f"{len(e['values'])} values", lambda a, b: True)
    for name in old_enums.keys() & new_enums.keys():
        compare(
            "enum value",
            {f"{name}.{v}": n for v, n in old_enums[name]["values"]},
            {f"{name}.{v}": n for v, n in new_enums[name]["values"]},
            str,
        )

    old_msgs = {m["name"]: m for m in ours["messages"]}
    new_msgs = {m["name"]: m for m in theirs["messages"]}
    # A message's fields are compared one by one below.
    compare("message", old_msgs, new_msgs, lambda m: f"{len(m['fields'])} fields", lambda a, b: True)
    for name in old_msgs.keys() & new_msgs.keys():
        # Keyed by number: a renamed field shows as one change, not a removal and an addition.
        compare(
            "field",
            {f"{name}#{f['number']}": f for f in old_msgs[name]["fields"]},
            {f"{name}#{f['number']}": f for f in new_msgs[name]["fields"]},
            _field_text,
        )
    order = {"removed": 0, "changed": 1, "added": 2}
    return sorted(changes, key=lambda c: (order[c.kind], c.what))


# ---- command line -----------------------------------------------------------------------
def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "render":
        sys.stdout.write(render_proto(json.loads(Path(args[1]).read_text())))
        return 0
    if len(args) == 2 and args[0] == "import-md":
        sys.stdout.write(json.dumps(facts_from_markdown(Path(args[1]).read_text()), indent=1) + "\n")
        return 0
    if len(args) == 3 and args[0] == "diff":
        try:
            changes = diff(facts_from_proto(Path(args[1])), facts_from_proto(Path(args[2])))
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for change in changes:
            print(change)
        breaking = sum(c.breaking for c in changes)
        print(f"{len(changes)} change(s), {breaking} wire-incompatible", file=sys.stderr)
        return 1 if breaking else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
