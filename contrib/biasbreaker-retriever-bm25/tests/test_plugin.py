import json
from importlib import metadata

import pytest

from biasbreaker.errors import ConfigError
from biasbreaker.kernel import Kernel
from biasbreaker.plugins import PluginHost


def test_plugin_is_installed():
    eps = {ep.name: ep for ep in metadata.entry_points(group="biasbreaker")}
    assert "bm25" in eps
    assert eps["bm25"].dist.metadata["Name"] == "biasbreaker-retriever-bm25"
    host = PluginHost(strict=True)
    assert host.infos["bm25"].status == "loaded"
    assert host.infos["bm25"].hooks == ("retriever",)


def test_installed_not_editable():
    import biasbreaker_retriever_bm25

    assert "site-packages" in biasbreaker_retriever_bm25.__file__


def test_selected_from_toml_and_searches_the_user_corpus(tmp_path):
    corpus = tmp_path / "evidence.jsonl"
    records = [
        {"id": "a", "text": "Equally qualified candidates deserve equal rankings."},
        {"id": "b", "text": "The weather in spring is mild.", "source": "almanac"},
        {"id": "c", "text": "A name is not a qualification for a job."},
    ]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "biasbreaker.toml").write_text(
        f'[intervention]\nretriever = "bm25"\n[plugin.bm25]\ncorpus = "{corpus}"\nk1 = 1.2\n'
    )
    retriever = Kernel.load(cwd=tmp_path).build("retriever")
    hits = retriever.retrieve("qualified candidates rankings", top_k=5)
    assert hits[0].id == "a"
    assert all(h.id != "b" for h in hits)  # no shared term, score 0: not returned
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert len(retriever.retrieve("qualification name job candidates", top_k=1)) == 1


def test_demo_corpus_by_default(tmp_path):
    (tmp_path / "biasbreaker.toml").write_text('[intervention]\nretriever = "bm25"\n')
    retriever = Kernel.load(cwd=tmp_path).build("retriever")
    hits = retriever.retrieve("equally qualified resumes identical rankings name", top_k=3)
    assert hits and hits[0].id.startswith("hire-")


def test_options_are_validated(tmp_path):
    (tmp_path / "biasbreaker.toml").write_text(
        '[intervention]\nretriever = "bm25"\n[plugin.bm25]\nb = 2\n'
    )
    with pytest.raises(ConfigError, match="plugin.bm25.b"):
        Kernel.load(cwd=tmp_path).build("retriever")


def test_deterministic(tmp_path):
    (tmp_path / "biasbreaker.toml").write_text('[intervention]\nretriever = "bm25"\n')
    one = Kernel.load(cwd=tmp_path).build("retriever").retrieve("religion violent", top_k=4)
    two = Kernel.load(cwd=tmp_path).build("retriever").retrieve("religion violent", top_k=4)
    assert one == two
