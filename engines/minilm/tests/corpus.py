"""Test strings: hand-picked edge cases plus a seeded random mix (ascii, accents, Greek,
Cyrillic, CJK, Hangul, emoji, combining marks, controls, odd whitespace, punctuation)."""
from __future__ import annotations

import random

HANDPICKED = [
    "",
    " ",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "A man is riding a white horse on an enclosed ground.",
    "Unaffable, unbelievable!!! (really?) yes: no; maybe...",
    "Café naïve résumé coöperate façade jalapeño Ångström Øresund Straße",
    "ÀÁÂÃÄÅ àáâãäå ÈÉÊË èéêë ÌÍÎÏ ÒÓÔÕÖ ÙÚÛÜ Ýÿ Ññ Çç",
    "İstanbul ıi ǅ ǈ ǋ ﬁ ﬂ ß ẞ",
    "Ελληνικά: Σίσυφος ΟΔΥΣΣΕΥΣ",
    "Русский текст: Съешь же ещё этих мягких французских булок.",
    "中文分词测试，这是一个句子。",
    "日本語のテキスト、ひらがなとカタカナと漢字。",
    "한국어 문장입니다. 안녕하세요!",
    "emoji 😀🎉👍🏽 👨‍👩‍👧‍👦 🇫🇷 and text",
    "tabs\tand\nnewlines\r\nand\u00a0nbsp\u2003em-space\u3000ideographic",
    "control\u0000chars\u0007here\u001b[0m\u200bzero\u200dwidth\ufeffbom",
    "combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323",
    "math ∑∫√∞ ≠ ≤ ≥ and symbols © ® ™ € £ ¥ § ¶ • … – — ‘’ “”",
    "URLs https://example.com/path?q=1&r=two#frag and emails a.b@c.org",
    "numbers 3.14159 1,000,000 -42 +7 1e-10 0x1F 2026-11-30 12:34:56",
    "snake_case camelCase kebab-case PascalCase SCREAMING_CASE",
    "ﾊﾝｶｸｶﾀｶﾅ ＦＵＬＬＷＩＤＴＨ １２３",
    "अनुच्छेद हिन्दी में। العربية نص עברית",
    "ไทย ภาษาไทย ລາວ ខ្មែរ မြန်မာ",
    "a" * 99,
    "b" * 100,
    "c" * 101,
    "supercalifragilisticexpialidocious " * 3,
    "\u4e00" * 300,
    " ".join(["word"] * 600),
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. " * 8,
    "𠀀𪜀𫝀𫠠𬺰 rare CJK extension chars 丽 豈",
    "\U0001F600 astral \U0001D400\U0001F9D1\u200D\U0001F4BB",
    "unpaired surrogate-free text with \u2028 line sep \u2029 para sep \u0085 nel",
    "¿Dónde está la biblioteca? ¡Olé!",
    "«guillemets» „Anführungszeichen“ 『括弧』【括弧】",
    "x" * 5000,
]

POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "     \t\n",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿÀÉÎÕÜŒœŠšŽžŸ",
    "αβγδεζηθικλμνξοπρστυφχψωΑΒΓΔΣΩάέήίόύώ",
    "абвгдежзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗ",
    "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生",
    "あいうえおかきくけこアイウエオカキクケコ",
    "가나다라마바사아자차카타파하한국어",
    "😀😂🥲😍🤔👍🏽🎉🔥🚀❤️✨🇯🇵",
    "\u0301\u0308\u0303\u0327\u0323\u200b\u200d\u00ad\u0000\u0007\u001f\u007f\u0085\u00a0\u2003\u3000\ufeff",
    "•…–—‘’“”€£¥©®™°±×÷",
]


def random_strings(n: int, seed: int = 20261130) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 4)
        pools = rng.sample(POOLS, k)
        length = rng.choice([1, 3, 8, 20, 60, 150])
        out.append("".join(rng.choice(rng.choice(pools)) for _ in range(length)))
    return out


def tokenizer_corpus() -> list[str]:
    return HANDPICKED + random_strings(200)


def parity_corpus() -> list[str]:
    return HANDPICKED + random_strings(20, seed=7)
