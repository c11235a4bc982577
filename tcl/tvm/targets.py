"""TVM targets and RPC trackers for measuring: parsing, checking that TVM can build, reaching a tracker."""
from __future__ import annotations

import json
import socket

import tvm
from tvm.target import Target, codegen

from .builder import default_target


class CollectError(RuntimeError):
    """A problem the user can fix: unknown network, a target TVM cannot build, an unreachable tracker."""




def parse_target(spec: str | dict | Target | None = None, num_cores: int | None = None,
                 mcpu: str | None = None) -> Target:
    """A Target from None (this host), a JSON dict, or 'llvm -mcpu=haswell -num-cores=1'-style text."""
    if isinstance(spec, Target):
        return spec
    if spec is None or spec == "llvm":
        return default_target(num_cores, mcpu)
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        spec = json.loads(spec)
    if isinstance(spec, str):
        kind, *flags = spec.split()
        spec = {"kind": kind}
        for f in flags:
            k, _, v = f.lstrip("-").partition("=")
            spec[k] = int(v) if v.isdigit() else v
    spec = dict(spec)
    if spec.get("kind") == "llvm":
        spec.setdefault("mcpu", mcpu or codegen.llvm_get_system_cpu())
        spec.setdefault("num-cores", num_cores or default_target().attrs["num-cores"])
    try:
        return Target(spec)
    except Exception as e:  # TVM raises several types for a bad target
        raise CollectError(f"not a valid TVM target: {spec} ({str(e).splitlines()[-1]})") from None


def check_target(target: Target) -> None:
    """Compile a tiny function for `target`, so a bad target fails now with a clear message."""
    if target.kind.name == "llvm":
        mcpu = str(target.attrs.get("mcpu", ""))
        if mcpu and not codegen.llvm_is_valid_cpu(mcpu, codegen.llvm_get_system_triple()):
            raise CollectError(f"LLVM does not know mcpu={mcpu!r} (target {target})")
    from tvm import te

    a = te.placeholder((8,), name="A")
    b = te.compute((8,), lambda i: a[i] + 1.0, name="B")
    try:
        tvm.compile(tvm.IRModule({"main": te.create_prim_func([a, b])}), target=target)
    except Exception as e:
        raise CollectError(f"TVM cannot build for target {target}: {str(e).strip().splitlines()[-1]}") from None


def local_device_target(target: Target) -> Target:
    """A GPU target measured on this machine: the device must exist; a bare kind ({"kind": "cuda"})
    gets the device's limits (MetaSchedule's GPU rules need max_threads_per_block and friends)."""
    if target.kind.name == "llvm":
        return target
    dev = tvm.device(target.kind.name, 0)
    if not dev.exist:
        raise CollectError(f"no {target.kind.name} device on this machine; measure through --rpc on a machine "
                           "that has one, or use an llvm target")
    return target if "max_threads_per_block" in target.attrs else Target.from_device(dev)


def parse_rpc(rpc: str | None) -> tuple[str, int] | None:
    if not rpc:
        return None
    host, _, port = rpc.rpartition(":")
    if not host or not port.isdigit():
        raise CollectError(f"--rpc wants HOST:PORT of a TVM RPC tracker, not {rpc!r}")
    return host, int(port)


def check_tracker(host: str, port: int, key: str, timeout: float = 5.0) -> None:
    """The tracker answers and has a server registered under `key` (or fails with what to do).
    Every step has a timeout: a port that accepts but is not a tracker fails, it does not hang."""
    import struct

    from tvm.rpc import base

    start = f"start one with `python -m tvm.exec.rpc_tracker --host {host} --port {port}`"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        raise CollectError(f"cannot reach the TVM RPC tracker at {host}:{port} ({e}); {start}") from None
    try:
        sock.settimeout(timeout)
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        magic = sock.recv(4)
        if len(magic) != 4 or struct.unpack("<i", magic)[0] != base.RPC_TRACKER_MAGIC:
            raise CollectError(f"{host}:{port} answers but is not a TVM RPC tracker; {start}")
        base.sendjson(sock, [base.TrackerCode.SUMMARY])
        reply = base.recvjson(sock)
        if not (isinstance(reply, list) and len(reply) == 2 and reply[0] == base.TrackerCode.SUCCESS
                and isinstance(reply[1], dict)):
            raise CollectError(f"{host}:{port}: unexpected answer to a tracker summary request: {str(reply)[:100]}")
        summary = reply[1]
    except (OSError, ValueError) as e:  # socket.timeout is an OSError; bad JSON a ValueError
        raise CollectError(f"{host}:{port} did not answer as a TVM RPC tracker within {timeout:g} s ({e}); "
                           f"{start}") from None
    finally:
        sock.close()
    keys = {str(info.get("key", "")).split(":")[-1] for info in summary.get("server_info", [])
            if isinstance(info, dict)}
    if key not in keys and key not in summary.get("queue_info", {}):
        raise CollectError(f"no RPC server with key {key!r} at tracker {host}:{port} (registered: "
                           f"{sorted(keys) or 'none'}); start one with `python -m tvm.exec.rpc_server "
                           f"--tracker={host}:{port} --key={key}`")
