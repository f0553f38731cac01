#!/usr/bin/env python3
# tok_make_stress.py: writes tests/data/tokenizer_stress.txt, the hard cases for the
# tokenizer parity test (olmo tokenize vs tiktoken). Deterministic (fixed seed), so the
# committed file can be regenerated bit for bit:  python3 scripts/tok_make_stress.py
# Characters of each Unicode general category are picked with Python's unicodedata
# (Unicode 14, older than both PCRE2's and tiktoken's tables, so every sampled
# character has the same properties in both engines).
import os
import random
import sys
import unicodedata

rng = random.Random(1234)
out = []


def line(s=""):
    out.append(s)


# --- one line per general category: a spread sample, run together and space-separated
by_cat = {}
for cp in range(0x110000):
    if 0xD800 <= cp <= 0xDFFF:
        continue
    by_cat.setdefault(unicodedata.category(chr(cp)), []).append(cp)
for cat in ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe",
            "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co"]:
    cps = [c for c in by_cat[cat] if c != 0x0A]  # '\n' separates lines
    sample = sorted(set(rng.sample(cps, min(len(cps), 300))))
    s = "".join(chr(c) for c in sample)
    line(f"{cat}: {s}")
    line(f"{cat} spaced: " + " ".join(chr(c) for c in sample[:120]))
    line(f"{cat} mixed: " + "".join(chr(c) + rng.choice(["a", "1", " ", "", "'s", "-", "\t", "Z9"]) for c in sample[:120]))

# --- every whitespace code point between letters, digits and punctuation
ws = [c for c in range(0x110000) if not (0xD800 <= c <= 0xDFFF) and chr(c).isspace() and c != 0x0A]
ws += [0x200B, 0x180E, 0xFEFF, 0x2060]  # look like spaces, are not White_Space
for c in ws:
    w = chr(c)
    line(f"a{w}b {w}{w}x 1{w}2 !{w}? {w}{w}{w} end{w}")

# --- letters: all cases, scripts, titlecase digraphs, Roman numerals, superscripts
line("ǅungla ǈudevit ǋonjuh ᾈᾉᾊ Dž Lj Nj ǲ ﬁ ﬂ ﬀ ﬃ ß ẞ İstanbul ıi Σίσυφος ΣΊΣΥΦΟΣ")
line("Ⅰ Ⅱ Ⅲ Ⅳ Ⅴ Ⅵ Ⅶ Ⅷ Ⅸ Ⅹ Ⅺ Ⅻ Ⅼ Ⅽ Ⅾ Ⅿ ⅰⅱⅲⅳ ↀↁↂ 〇〡〢〣 𐍁𐍊 King Henry Ⅷ wrote Ⅻ")
line("x² + y³ = z⁴; H₂O; 10⁻⁹; ½ ⅓ ¼ ¾ ⅛ ⅞ ⅒; ① ② ⑳ ㉑ ㊿; ❶ ➓; 𝟘𝟙𝟚 𝟎𝟏; ١٢٣ ۴۵۶ ४५६ ০১২ ๑๒๓ 一二三")
line("𝐀𝐁𝐂 𝕬𝕭𝕮 𝒜ℬ𝒞 ℌℑℜ ａｂｃ ＡＢＣ １２３ ｶﾀｶﾅ ㋐㋑ ꙮ ꧁꧂")
line("ʰʲʷ ˠˤ ᵃᵇᶜ ꜀ ʼ ˈ ː ᴬᴮᴰ ⁱⁿ ₐₑₒ ㇰㇱ 々 〻 ゝゞ ーｰ")

# --- CJK and other scripts
line("中文测试：我们在北京大学学习人工智能。今天天气很好，不是吗？")
line("日本語のテキスト、カタカナとひらがな。東京は晴れです！ｶﾀｶﾅも。")
line("한국어 텍스트입니다. 안녕하세요, 세계! ᄀᄁᄂ ㄱㄲㄴ")
line("漢字" * 200)
line("ภาษาไทยไม่มีช่องว่างระหว่างคำ ລາວ ພາສາ ខ្មែរ မြန်မာ ᠮᠣᠩᠭᠣᠯ ትግርኛ አማርኛ ᏣᎳᎩ ᐃᓄᒃᑎᑐᑦ")
line("हिन्दी में पाठ। ক্ষেত্র বাংলা। தமிழ் மொழி. తెలుగు ಕನ್ನಡ മലയാളം ગુજરાતી ਪੰਜਾਬੀ ଓଡ଼ିଆ සිංහල")
line("Ελληνικά κείμενα. Русский текст, Ёё, Українська їжак, Српски ђ, Български ъ, Ქართული ქართული Հայերեն")

# --- RTL
line("العربية: مرحبا بالعالم! هذا نص تجريبي، مع أرقام ١٢٣ و 456. ﷺ ﷽ ﻻ")
line("עברית: שָׁלוֹם עוֹלָם! זה טקסט ניסיון, עם ניקוד. ‏RTL mark‏ ‎LTR mark‎ ‪embed‬ ‮override‬")
line("فارسی: سلام دنیا ۱۲۳۴۵ — اردو: ہیلو دنیا — ܣܘܪܝܝܐ — ދިވެހި — ߒߞߏ")

# --- combining marks
line("e\u0301 a\u0300 n\u0303 o\u0308 u\u0308\u0301 \u0301start q\u0323\u0307 Z\u0351\u0352\u0353\u0354\u0355\u0356\u0357a\u0358\u0359\u035a\u035b\u035c\u035dl\u035e\u035f\u0360\u0361g\u0362\u0363\u0364o")
line("Ṩ̸̢̛͈̦̹̫̳̘͚̻̈́̋͒͆̎̀̈́͠͝ṯ̵̡̺̳͈̳̺̝̮̈́̌r̸̢̟̼̗̹̈́̓̏̀̏͘ẹ̵̛͔̹͉̝̣̀̈́̾̂̾ş̷̡̰̤̗̈́̾́̀s̷̡̨̛̼͙̗̥̫̆̓̽̏̈́̔ 1\u20e3 #\u20e3 a\u20dd \u0e01\u0e34\u0e4a")
line("\u0300" * 50 + "x" + "\u0301" * 50 + " " + "\u0903" * 20)

# --- emoji
line("😀😃😄😁 👍👍🏻👍🏼👍🏽👍🏾👍🏿 👨‍👩‍👧‍👦 👩🏽‍💻 🧑🏿‍🤝‍🧑🏻 🏳️‍🌈 🏴‍☠️ ❤️‍🔥 🇺🇸🇯🇵🇩🇪 🏴󠁧󠁢󠁳󠁣󠁴󠁿 1️⃣ #️⃣ ©️ ™️ ↔️")
line("emoji🙂inside👍🏽words ok👌🏻. 🤷‍♀️🤷🏾‍♂️ 🫠🫡🫶🏼 🐈‍⬛ 🧔🏻‍♀️" + "🎉" * 100)
line("👨‍👩‍👧‍👦" * 50)

# --- whitespace runs
for n in [1, 2, 3, 4, 7, 8, 15, 16, 31, 64, 100, 257]:
    line("x" + " " * n + "y" + " " * n + "1" + " " * n + "!" + " " * n)
    line("\t" * n + "tabbed" + " \t" * n + "z")
line("trailing spaces   ")
line("   leading spaces")
line("mixed \t \t\t  \u00a0\u00a0 \u3000\u3000 \u2003 runs \u00a0x\u00a0")
line("crlf line\r")
line("\r")
line("a\rb\r\rc\r \r\t\rd")
line("")
line("")
line("   ")
line("\t")
line(" " * 3000)

# --- digits
for n in range(1, 26):
    line("".join(str((i * 7 + n) % 10) for i in range(n)) + " n" + "9" * n + "x" + "0" * n)
line("3.14159265358979 1,000,000 1_000_000 0xDEADBEEF 0b1010 1e-10 -42 +7 $19.99 €5 ¥100 100% 12:30:45 2024-01-31 192.168.0.1")
line("١٢٣٤٥٦٧٨٩٠١٢ ０１２３４５６７８９ ⅠⅡⅢⅣⅤⅥ ①②③④⑤⑥⑦ ½½½½ ²³²³²³")
line("1" * 3000)

# --- contractions: every suffix in every case, straight and curly apostrophes
suffixes = ["s", "t", "re", "ve", "m", "ll", "d"]
cases = []
for suf in suffixes:
    variants = {""}
    for ch in suf:
        variants = {v + c for v in variants for c in (ch.lower(), ch.upper())}
    cases += sorted(variants)
line(" ".join("it'" + c for c in cases))
line(" ".join("IT'" + c for c in cases))
line("".join("'" + c for c in cases))
line(" ".join("x\u2019" + c for c in cases) + " don't won't can't y'all ma'am o'clock rock'n'roll '' ''' 'sss 'lll 'T'S")
line("'s 'S 'll 'LL 'Ll 'lL 're 'Re 'RE 've 'VE 'm 'M 'd 'D 't 'T 'st 'mm 'dd 'llama 'verb 'reed")
line("He's She'S They'LL We'Re You'VE I'M It'D Don'T ABC'S ΔΣ'S 中'S 1'S ' s")

# --- code
line("int main(int argc, char **argv) { for (int i = 0; i < argc; ++i) printf(\"%s\\n\", argv[i]); return 0; }")
line("    def f(self, x: int = 3, *args, **kwargs) -> Dict[str, List[int]]:  # comment")
line("        return {k: v**2 for k, v in zip(range(10), map(lambda y: y // 2, x)) if v != None}")
line("const fn = async (a, b) => { await fetch(`/api/${a}?q=${encodeURIComponent(b)}`); };  // JS")
line("fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u8> = vec![0; 1024]; println!(\"{:?}\", &v[..]); Ok(()) }")
line("SELECT u.id, COUNT(*) AS n FROM users u LEFT JOIN orders o ON o.uid = u.id WHERE u.name LIKE '%a_' GROUP BY 1;")
line("<!DOCTYPE html><html lang=\"en\"><body><div class='x'>&amp;&lt;&gt;&#x1F600;</div></body></html>")
line("{\"key\": [1, 2.5e-3, true, null, \"\\u00e9\\n\"], \"nested\": {\"a\": {}}}")
line("#!/bin/bash\nset -euo pipefail; for f in *.txt; do echo \"${f%.txt}\" | tr a-z A-Z >> out.log 2>&1; done")
line("\\begin{equation} \\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2} \\end{equation} % LaTeX")
line("if (x&&y||!z) {a+=b;c-=d;e*=f;g/=h;i%=j;k<<=1;l>>=2;m>>>=3;n^=o;p|=q;r&=s;} ?: ?? ?. :: -> => <=> === !==")
line("\t\tfoo();\n\t}\n}")
line("    " * 20 + "deep_indent = True")

# --- punctuation
line("!!! ??? ... --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>> ||| \\\\\\ /// ~~~ ``` ''' \"\"\"")
line("¡Hola! ¿Qué? «Bonjour» „Guten Tag“ “quoted” ‘single’ — – … · • † ‡ § ¶ ‰ ′ ″ ‹›")
line("a.b,c;d:e!f?g(h)i[j]k{l}m<n>o/p\\q|r`s~t@u#v$w%x^y&z*_+-=")
line(".,;:!?" * 500)
line("!\n")
line("?\r\n")
line("...\n\n\n")

# --- very long words (the O(n log n) merge path) and long mixed runs
line("a" * 5000)
line("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4000)))
line("".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(3000)))
line("abc" * 2000)
line("Supercalifragilisticexpialidocious" * 100)
line("é" * 2000 + " " + "ñ" * 1000)
line("ab" * 1500 + "'s")
line("".join(rng.choice(" abc123!?\t.,é中😀'") for _ in range(5000)))
line("Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism floccinaucinihilipilification")

# --- random printable ASCII and random BMP text
for _ in range(30):
    line("".join(chr(rng.randint(0x20, 0x7E)) for _ in range(rng.randint(1, 200))))
pool = [c for c in range(0x20, 0x3000) if not (0xD800 <= c <= 0xDFFF) and unicodedata.category(chr(c)) not in ("Cn", "Cs") and c != 0x0A]
for _ in range(30):
    line("".join(chr(rng.choice(pool)) for _ in range(rng.randint(1, 200))))

# --- special-token strings as plain text (olmo tokenize without --allow-special)
line("<|endoftext|> <|pad|> <|im_start|>user<|im_end|> |||PHONE_NUMBER||| <|extra_id_0|> <|fim_prefix|><|endofprompt|>")

# --- newline runs (the file's own lines) and a final line without a newline
out.append("\n\n\n\r\n\r\n\n \n\t\n")
out.append("no newline at end")

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tokenizer_stress.txt")
if len(sys.argv) > 1:
    path = sys.argv[1]
with open(path, "w", encoding="utf-8", newline="") as f:
    f.write("\n".join(out))
print(f"wrote {path}: {len(out)} lines", file=sys.stderr)
