"""The KB format is defined once (kb/schema.py); a start reads a compiled artifact of plain data,
cached by content, never a pickle, never a stale or damaged copy."""
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
from nccl_doctor.kb.artifact import DeferredItems, Record, read_artifact
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


def test_cache_holds_artifacts_only_and_evicts_old_ones(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "nccl-doctor"
    cache.mkdir(parents=True)
    (cache / "kb-0123456789abcdef.pickle").write_bytes(b"old pickle cache")
    (cache / "kb-2-0123456789abcdef.json").write_text("{}")  # the format before: kept among the newest
    folder = tmp_path / "kb"
    folder.mkdir()
    for n in range(knowledge.KEEP_ARTIFACTS + 3):
        (folder / "mini.yaml").write_text(MINI.replace("Old title", f"Title {n}"))
        assert _load(folder).causes["c"].title == f"Title {n}"
    files = sorted(cache.iterdir())
    assert len(files) == knowledge.KEEP_ARTIFACTS and all(p.suffix == knowledge.SUFFIX for p in files), files
    for path in files:
        key = path.stem.removeprefix("kb-")
        kb, _ = read_artifact(path.read_bytes(), key=key)
        assert kb.causes["c"].title.startswith("Title ")


def _damaged(artifact: bytes) -> dict[str, bytes]:
    """Ways a cache file can be wrong: cut short, a changed byte, not ours at all, another
    version's, another KB's, and one that checks out but holds no KB."""
    import marshal
    import zlib

    header, _, payload = artifact.partition(b"\n")[2].partition(b"\n")
    version, key, _, _ = header.split()
    flipped = bytearray(artifact)
    flipped[-100] ^= 0x20
    foreign = marshal.dumps({"kb": {"facts": 5}})
    return {
        "empty": b"",
        "truncated": artifact[: len(artifact) // 2],
        "one byte changed": bytes(flipped),
        "garbage": os.urandom(4096),
        "JSON of the format before": b'{"format": "nccl-doctor-kb", "version": 2, "key": "x", "kb": 5}',
        "another version": artifact.replace(version, b"1.1", 1),
        "another KB": artifact.replace(key, b"0" * len(key), 1),
        "no KB inside": b"nccl-doctor-kb\n" + b" ".join([version, key, str(len(foreign)).encode(),
                                                        f"{zlib.crc32(foreign):08x}".encode()]) + b"\n" + foreign,
    }


def test_a_damaged_or_foreign_artifact_is_rebuilt_with_a_message(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "mini.yaml").write_text(MINI)
    _load(folder)
    (path,) = (tmp_path / "cache" / "nccl-doctor").glob("kb-*")
    good = path.read_bytes()
    assert capsys.readouterr().err == ""
    for name, data in _damaged(good).items():
        path.write_bytes(data)
        assert _load(folder).causes["c"].title == "Old title", name
        err = capsys.readouterr().err
        assert err.startswith("nccl-doctor: rebuilding the cached knowledge base") and err.count("\n") == 1, (name, err)
        assert "Traceback" not in err
        assert path.read_bytes() == good, name  # written again, whole
    _load(folder)
    assert capsys.readouterr().err == ""


def test_an_artifact_others_can_write_is_not_trusted(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "mini.yaml").write_text(MINI)
    _load(folder)
    (path,) = (tmp_path / "cache" / "nccl-doctor").glob("kb-*")
    path.chmod(0o666)
    assert _load(folder).causes["c"].title == "Old title"
    assert "not written by this user alone" in capsys.readouterr().err
    assert path.stat().st_mode & 0o777 == 0o600


def test_packaged_artifact_matches_a_fresh_build(tmp_path, monkeypatch):
    """What a start reads from the cache is what the YAML says (examples left out)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cached, extras = knowledge.load_knowledge()
    fresh = load_files(kb_files(DATA_DIR), DATA_DIR, examples=False)
    assert cached == fresh
    assert set(extras["symptom_needles"]) == set(fresh.symptoms)
    rules = cached.rules
    assert isinstance(rules, DeferredItems) and set(rules) == set(fresh.rules)
    some = next(iter(fresh.rules))
    assert rules[some] == fresh.rules[some] and rules[some] is rules[some] and isinstance(rules[some], Record)
    with pytest.raises(KeyError):
        rules["no_such_rule"]
    with pytest.raises(TypeError):
        rules[some]["when"] = None


def test_the_cached_kb_diagnoses_as_a_fresh_build_does(doctor):
    """The start-up path (the cache file: rules parsed when tried, conditions and evidence from
    the layout, indexes as saved) reports exactly what a KB compiled from its YAML reports:
    diagnoses, evidence, questions, plan, similar incidents, HOW and WHY."""
    from _packaged import packaged_doctor

    fresh = packaged_doctor()
    incidents = list(doctor.kb.incidents.values())[::25]
    cases = [("hang at init", "", ()), ("训练在初始化时卡住了，两台机器", "", ()),
             ("NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129", "", ())]
    cases += [(i.reporter, i.get("log") or "", leave) for i in incidents for leave in ((), (i.source,))]
    for text, log, leave in cases:
        reports = []
        for source in (doctor, fresh):
            session = source.session(leave_out=leave)
            session.tell(text)
            if log:
                session.add_log(log.splitlines())
            report = session.report()
            top = [d["id"] for d in report["diagnoses"][:2]]
            reports.append((report, [session.how(c).to_dict() for c in top],
                            [session.why(q["id"]).to_dict() for q in report["questions"]]))
        assert reports[0] == reports[1], (text[:60], leave)


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
