"""One test per hookspec: a plugin registers a named implementation, config selects it, the
kernel builds it with the plugin's validated options and itself as the build context."""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from biasbreaker import hookspecs
from biasbreaker.errors import PluginError, TraceError
from biasbreaker.hookspecs import hookimpl
from biasbreaker.kernel import Kernel
from biasbreaker.llm import LLMRequest, LLMResponse, complete_sync
from biasbreaker.machine import ControlMachine, MachineConfig
from biasbreaker.points import EXTENSION_POINTS, POINTS
from biasbreaker.trace import TraceWriter
from biasbreaker.trace.sink import build_backend, open_sink
from biasbreaker.trace.store import StoreSink

DOCS = Path(__file__).resolve().parents[2] / "docs"


class Opts(BaseModel):
    model_config = ConfigDict(extra="forbid")
    level: int = 1


class Built:
    def __init__(self, options: Opts, context: Kernel) -> None:
        self.options = options
        self.context = context


def _plugin_for(point: str, name: str) -> object:
    def hook(register: Any) -> None:
        register(name, Built, options=Opts, summary=f"test {point}")
        if POINTS[point].multiple:  # a skeptic panel needs two distinct members
            register(name + "-b", Built, options=Opts, summary=f"test {point}")

    hook.__name__ = point
    return type("P", (), {point: staticmethod(hookimpl(hook))})()


def _selection(point: str, name: str) -> dict[str, Any]:
    section, key = POINTS[point].selected_by.split(".")
    value: Any = [name, name + "-b"] if POINTS[point].multiple else name
    return {section: {key: value}, "plugin": {name: {"level": 3}}}


def _exercise(point: str, register_plugin: Any, make_kernel: Any) -> None:
    name = "test-" + point.replace("_", "-")
    register_plugin(_plugin_for(point, name), name=f"p-{point}")
    kernel = make_kernel(_selection(point, name))
    assert kernel.selected(point)[0] == name
    obj = kernel.build(point, name)
    assert isinstance(obj, Built)
    assert obj.options == Opts(level=3)  # validated by the plugin's own model
    assert obj.context is kernel
    impl = kernel.registry.get(point, name)
    assert (impl.plugin, impl.summary) == (f"p-{point}", f"test {point}")


def test_hook_classify_route(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("classify_route", register_plugin, make_kernel)


def test_hook_skeptic(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("skeptic", register_plugin, make_kernel)


def test_hook_diagnoser(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("diagnoser", register_plugin, make_kernel)


def test_hook_retriever(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("retriever", register_plugin, make_kernel)


def test_hook_editor(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("editor", register_plugin, make_kernel)


def test_hook_aggregator(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("aggregator", register_plugin, make_kernel)


def test_hook_calibrator(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("calibrator", register_plugin, make_kernel)


def test_hook_framework_adapter(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("framework_adapter", register_plugin, make_kernel)


def test_hook_scorer(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("scorer", register_plugin, make_kernel)


class EchoClient:
    model = "echo-1"

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return LLMResponse(text=request.messages[-1].content.upper(), model=self.model)

    async def aclose(self) -> None:
        return None


def test_hook_llm_client(register_plugin: Any, make_kernel: Any) -> None:
    _exercise("llm_client", register_plugin, make_kernel)  # the registry contract

    class Plugin:
        @hookimpl
        def llm_client(self, register: Any) -> None:
            register("echo", lambda options, context: EchoClient())

    register_plugin(Plugin(), name="echo-plugin")
    kernel = make_kernel({"llm": {"client": "echo"}})
    client = kernel.llm()
    assert client is kernel.llm()
    assert complete_sync(client, LLMRequest.chat("hi")).text == "HI"
    # an object that is not an LLMClient is refused, naming the plugin
    kernel = make_kernel({"llm": {"client": "test-llm-client"}})
    with pytest.raises(PluginError, match="lacks model/complete/aclose"):
        kernel.llm()


class MemoryStore:
    """A stranger's line store: rows in a dict, the (thread, seq) key refused twice."""

    location = "memory://test"

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int], bytes] = {}

    def threads(self) -> list[str]:
        return sorted({t for t, _ in self.rows})

    def lines(self, thread_id: str) -> list[bytes]:
        return [line for (t, _), line in sorted(self.rows.items()) if t == thread_id]

    def append(self, thread_id: str, seq: int, line: bytes) -> None:
        if (thread_id, seq) in self.rows:
            raise TraceError(f"thread {thread_id!r} seq {seq} taken")
        self.rows[(thread_id, seq)] = line

    def close(self) -> None:
        return None


class MemoryBackend:
    def __init__(self) -> None:
        self.store = MemoryStore()

    def open_sink(self, location: str, *, adapter: str, fsync: bool) -> StoreSink:
        return StoreSink(self.store, adapter=adapter, signer=None)

    def open_store(self, location: str) -> MemoryStore:
        return self.store


def test_hook_trace_sink(register_plugin: Any, make_kernel: Any, tmp_path: Path) -> None:
    _exercise("trace_sink", register_plugin, make_kernel)  # the registry contract
    backend = MemoryBackend()

    class Plugin:
        @hookimpl
        def trace_sink(self, register: Any) -> None:
            register("memory", lambda options, context: backend)

    register_plugin(Plugin(), name="memory-plugin")
    kernel = make_kernel({"trace": {"sink": "memory", "url": "memory://test"}})
    sink = open_sink(kernel, "ignored-by-a-database-sink")
    records: list[Any] = []
    config = MachineConfig.from_settings(kernel.settings)
    machine = ControlMachine(config, recorder=records.append)
    for fast in (0.0, 0.1):
        machine.step(fast, fast)
    sink.write("t1", machine, records)
    sink.seal("t1")
    with TraceWriter(tmp_path / "t1.jsonl", sink_header(machine), signer=None) as writer:
        for record in records:
            writer.write(record)
        writer.seal()
    assert b"".join(backend.store.lines("t1")) == (tmp_path / "t1.jsonl").read_bytes()
    # a factory that builds no TraceBackend is refused, naming what it built
    kernel = make_kernel({"trace": {"sink": "test-trace-sink", "url": "x://y"}})
    with pytest.raises(PluginError, match="lacks open_sink/open_store"):
        build_backend(kernel)


def sink_header(machine: ControlMachine) -> Any:
    return machine.config.trace_header({"adapter": "langgraph", "thread": "t1"})


def test_every_hookspec_has_a_test_here() -> None:
    module = sys.modules[__name__]
    specs = [
        n
        for n, f in inspect.getmembers(hookspecs, inspect.isfunction)
        if hasattr(f, "biasbreaker_spec")
    ]
    assert sorted(specs) == sorted(p.name for p in EXTENSION_POINTS)
    for name in specs:
        assert callable(getattr(module, f"test_hook_{name}", None)), name


def test_every_hookspec_signature_is_documented() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md"))
    headings = set(re.findall(r"^#+ +`([^`]+)`", text, flags=re.MULTILINE))
    for point in EXTENSION_POINTS:
        fn = getattr(hookspecs, point.name)
        signature = f"{point.name}{inspect.signature(fn)}".replace("'", "")
        assert signature in headings, f"docs/ has no heading `{signature}`"


def test_hookspecs_call_no_one_but_register() -> None:
    # every spec takes exactly the register callback: the kernel owns the registry
    for point in EXTENSION_POINTS:
        params = list(inspect.signature(getattr(hookspecs, point.name)).parameters)
        assert params == ["register"], point.name
