"""The KB format is defined once (kb/schema.py); a start reads a compiled JSON artifact, cached by
content, never a pickle and never a stale copy."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from nccl_doctor import knowledge
from nccl_doctor.engine import Doctor
from nccl_doctor.kb import schema
from nccl_doctor.kb.artifact import Record
from nccl_doctor.kb.load import DATA_DIR, kb_files, load_files

MINI = """
facts:
  - {id: seen, type: bool, question: Seen?}
rules:
  - id: r
    when: {fact: seen}
    then: {evidence: [{cause: c, strength: 0.5}]}
    examples: {fires: [{facts: {seen: true}}], silent: [{facts: {seen: false}}]}
causes:
  - {id: c, title: Old title, area: network, explanation: x, fixes: [f], references: ['https://example.org']}
fixes:
  - {id: f, title: F, steps: [s]}
"""


def _models() -> list[type[BaseModel]]:
    return [obj for obj in vars(schema).values()
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == schema.__name__]


def test_no_field_name_hides_a_dict_method():
    """Runtime items are dicts read by attribute: a field named like a dict method would be unreadable."""
    for model in _models():
        clash = set(model.model_fields) & set(dir(dict))
        assert not clash, f"{model.__name__} fields {clash} shadow dict attributes"


def test_runtime_items_carry_every_schema_field():
    kb = load_files(kb_files(DATA_DIR), DATA_DIR)
    samples = {"Fact": kb.facts, "Symptom": kb.symptoms, "Signature": kb.signatures, "Rule": kb.rules,
               "Cause": kb.causes, "Fix": kb.fixes}
    for name, items in samples.items():
        fields = set(getattr(schema, name).model_fields)
        for item in items.values():
            assert set(item) == fields, (name, item.id)
            assert isinstance(item, Record)
    rule = next(iter(kb.rules.values()))
    with pytest.raises(TypeError):
        rule["when"] = None
    with pytest.raises(AttributeError):
        rule.no_such_field  # noqa: B018 - a typo fails loudly


def test_no_module_mirrors_the_schema_models():
    """Only kb/schema.py describes items; the runtime container declares no fields of its own."""
    import ast

    from nccl_doctor.kb.artifact import KnowledgeBase

    names = {m.__name__ for m in _models()} - {"KnowledgeBase", "KBFile"}
    root = Path(__file__).resolve().parents[1]
    for folder in ("kb", "engine", "src/nccl_doctor", "tui"):
        for path in (root / folder).rglob("*.py"):
            if path.name == "schema.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    assert node.name not in names, f"{path}: class {node.name} mirrors kb/schema.py"
    assert not getattr(KnowledgeBase, "__annotations__", {})


def _load(folder: Path):
    kb, _ = knowledge.load_knowledge(folder)
    return kb


def test_an_edit_keeping_size_and_time_is_seen(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "kb"
    folder.mkdir()
    path = folder / "mini.yaml"
    path.write_text(MINI)
    assert _load(folder).causes["c"].title == "Old title"
    stat = path.stat()
    path.write_text(MINI.replace("Old title", "New title"))  # same length
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert _load(folder).causes["c"].title == "New title"


def test_cache_holds_json_artifacts_only_and_evicts_old_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "nccl-doctor"
    cache.mkdir(parents=True)
    (cache / "kb-0123456789abcdef.pickle").write_bytes(b"old pickle cache")
    folder = tmp_path / "kb"
    folder.mkdir()
    for n in range(knowledge.KEEP_ARTIFACTS + 3):
        (folder / "mini.yaml").write_text(MINI.replace("Old title", f"Title {n}"))
        assert _load(folder).causes["c"].title == f"Title {n}"
    files = sorted(p.name for p in cache.iterdir())
    assert len(files) == knowledge.KEEP_ARTIFACTS and all(f.endswith(".json") for f in files), files
    for name in files:
        data = json.loads((cache / name).read_text())
        assert data["format"] == "nccl-doctor-kb"


def test_a_damaged_artifact_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "mini.yaml").write_text(MINI)
    _load(folder)
    (artifact,) = (tmp_path / "cache" / "nccl-doctor").glob("kb-*.json")
    artifact.write_text('{"format": "nccl-doctor-kb", "version": 2, "key": "x", "kb": 5}')
    assert _load(folder).causes["c"].title == "Old title"


def test_packaged_artifact_matches_a_fresh_build(tmp_path, monkeypatch):
    """What a start reads from the cache is what the YAML says (examples left out)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cached, extras = knowledge.load_knowledge()
    fresh = load_files(kb_files(DATA_DIR), DATA_DIR, examples=False)
    assert cached == fresh
    assert set(extras["symptom_needles"]) == set(fresh.symptoms)


def test_one_shot_start_imports_neither_yaml_nor_pydantic_once_cached(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    code = ("import sys, nccl_doctor; s = nccl_doctor.load_doctor().session(); s.tell('hang at init'); "
            "s.diagnoses(); s.plan(); print(sorted(m for m in sys.modules if m.split('.')[0] in ('yaml', 'pydantic')))")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True)  # builds the artifact
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "[]"


def test_direct_evidence_on_a_signature_reads_like_a_rule(tmp_path):
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "sig.yaml").write_text("""
signatures:
  - id: shm_full
    description: NCCL could not create its shared-memory segment.
    pattern: 'Error while creating shared memory segment'
    evidence: [{cause: c, strength: 0.8}]
    references: ['https://example.org/shm']
causes:
  - {id: c, title: C, area: container, explanation: x, fixes: [f], references: ['https://example.org']}
fixes:
  - {id: f, title: F, steps: [s]}
""")
    doctor = Doctor(load_files(kb_files(folder), folder))
    session = doctor.session()
    session.add_log(["NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9)"])
    (diagnosis,) = session.diagnoses()
    assert diagnosis.id == "c" and abs(diagnosis.confidence - 0.8) < 1e-6
    (item,) = diagnosis.evidence
    assert item.rule == "shm_full" and "shared-memory segment" in item.description
    assert session.how("c").rules[0]["defined_at"].startswith("sig.yaml:")


def test_a_copy_of_the_packaged_kb_in_the_layout_loads(tmp_path):
    """`diagnose --kb DIR` on a copy of the packaged KB (the layout works outside the package)."""
    copy = tmp_path / "kb"
    shutil.copytree(DATA_DIR, copy, ignore=shutil.ignore_patterns("*.py", "*.json", "__pycache__"))
    assert len(load_files(kb_files(copy), copy).causes) == len(load_files(kb_files(DATA_DIR), DATA_DIR).causes)


def test_a_start_walks_and_hashes_the_kb_folder_once(tmp_path, monkeypatch):
    """load_doctor's memo key and the artifact's key come from one walk and one hash."""
    import nccl_doctor

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "mini.yaml").write_text(MINI)
    calls = {"walk": 0, "hash": 0}

    def counted(name, real):
        def call(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        return call

    from nccl_doctor.kb import load

    for module in (knowledge, load):  # wherever a caller takes them from
        monkeypatch.setattr(module, "kb_files", counted("walk", load.kb_files))
        monkeypatch.setattr(module, "content_key", counted("hash", load.content_key))
    nccl_doctor.load_doctor(folder)  # builds the artifact
    nccl_doctor._DOCTORS.clear()
    calls.update(walk=0, hash=0)
    assert nccl_doctor.load_doctor(folder).kb.causes["c"].title == "Old title"  # from the cache
    assert calls == {"walk": 1, "hash": 1}


def test_the_walk_skips_hidden_entries_and_orders_the_layout(tmp_path):
    for name in ("incidents/b.yaml", "causes/net/a.yaml", "vocabulary/v.yml", "extra.yaml", ".git/x.yaml",
                 "causes/.hidden.yaml", "causes/notes.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "causes" / "dir.yaml").mkdir()
    found = [p.relative_to(tmp_path).as_posix() for p in kb_files(tmp_path)]
    assert found == ["vocabulary/v.yml", "causes/net/a.yaml", "incidents/b.yaml", "extra.yaml"]


def test_a_map_whose_keys_name_dict_methods_keeps_the_methods():
    """Records are built by the JSON parser itself; a map keyed like dict methods (a document of
    terms, env variables) still reads by key and keeps items()/keys()."""
    from nccl_doctor.kb.artifact import runtime

    kb = runtime({"fixes": {"f": {"id": "f", "env": {"items": "1", "keys": "2", "NCCL_IB_HCA": "mlx5"}}}})
    env = kb.fixes["f"].env
    assert dict(env.items()) == {"items": "1", "keys": "2", "NCCL_IB_HCA": "mlx5"} and env["keys"] == "2"
    assert kb.fixes["f"].id == "f"
    with pytest.raises(TypeError):
        env["items"] = "3"
