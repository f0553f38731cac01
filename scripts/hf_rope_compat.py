#!/usr/bin/env python3
"""hf_rope_compat.py: RoPE settings of an HF Olmo3 config in every layout transformers has
used, for scripts/gpu_bench_torch.py and scripts/gpu_hf_compare.py.

  (a) transformers 4.x: attributes (config.json keys) rope_theta and rope_scaling (None or a
      dict with rope_type "yarn", factor, ...); the scaling applies to every layer;
  (b) 5.x, flat: rope_parameters = {"rope_type": ..., "rope_theta": ..., factor ...};
  (c) 5.x, per layer type: rope_parameters = {"full_attention": {...}, "sliding_attention":
      {...}}, each in the flat form of (b) (a legacy rope_scaling lands in full_attention).

rope_of(cfg, layer_type) reads any of them (a config object or a config.json dict) and
returns {"rope_theta": float, "rope_type": str, + the scaling keys}. olmo3_rope_kwargs(cls,
theta) gives the keyword arguments that make class cls (an Olmo3Config) use plain RoPE with
that theta, in the layout cls expects, found by building a default instance.

  /usr/bin/python3 scripts/hf_rope_compat.py --selftest   (no transformers: synthetic configs)
"""
import sys

LAYER_TYPES = ("full_attention", "sliding_attention")


def _get(cfg, key):
    if isinstance(cfg, dict):
        return cfg.get(key)
    return getattr(cfg, key, None)


def layout(cfg):
    """'legacy' | 'flat' | 'per_layer_type' (what rope_of will read)."""
    rp = _get(cfg, "rope_parameters")
    if isinstance(rp, dict) and rp:
        return "per_layer_type" if any(k in rp for k in LAYER_TYPES) else "flat"
    return "legacy"


def rope_of(cfg, layer_type="full_attention"):
    """The RoPE parameters one layer type of cfg uses: rope_theta (float), rope_type, and any
    scaling keys (factor, beta_fast, beta_slow, original_max_position_embeddings, ...)."""
    kind = layout(cfg)
    if kind == "legacy":
        theta = _get(cfg, "rope_theta")
        out = dict(_get(cfg, "rope_scaling") or {})
        if "type" in out and "rope_type" not in out:   # older spelling
            out["rope_type"] = out.pop("type")
        out.setdefault("rope_type", "default")
    else:
        rp = _get(cfg, "rope_parameters")
        if kind == "per_layer_type":
            rp = rp.get(layer_type) or {}
        out = dict(rp)
        theta = out.pop("rope_theta", None)
        if theta is None:
            theta = _get(cfg, "rope_theta")
        out.setdefault("rope_type", "default")
    if theta is None:
        raise ValueError("no rope_theta in the config (layout %s, layer type %s)" % (kind, layer_type))
    out["rope_theta"] = float(theta)
    return out


def summary(cfg):
    """One line for the logs: the layout and each layer type's RoPE."""
    parts = []
    for lt in LAYER_TYPES:
        try:
            r = rope_of(cfg, lt)
            parts.append("%s %s theta %g%s" % (lt, r["rope_type"], r["rope_theta"],
                                               "".join(", %s %s" % (k, r[k]) for k in sorted(r)
                                                       if k not in ("rope_type", "rope_theta"))))
        except ValueError as e:
            parts.append("%s: %s" % (lt, e))
    return "rope layout %s: %s" % (layout(cfg), "; ".join(parts))


def olmo3_rope_kwargs(cls, theta):
    """Keyword arguments for cls(...) (an Olmo3Config class) that set plain RoPE with theta."""
    probe = cls(num_hidden_layers=4)
    kind = layout(probe)
    flat = {"rope_type": "default", "rope_theta": float(theta)}
    if kind == "legacy":
        return {"rope_theta": float(theta)}
    if kind == "flat":
        return {"rope_parameters": dict(flat)}
    return {"rope_parameters": {lt: dict(flat) for lt in LAYER_TYPES}}


def check_theta(cfg, theta):
    """Raises unless every layer type of cfg uses plain RoPE with theta."""
    for lt in LAYER_TYPES:
        r = rope_of(cfg, lt)
        if abs(r["rope_theta"] - theta) > 1e-6 * theta or r["rope_type"] != "default":
            raise ValueError("config %s: %s has %s, not default RoPE theta %g" % (layout(cfg), lt, r, theta))


def selftest():
    ok = True

    def expect(what, got, want):
        nonlocal ok
        good = got == want
        ok = ok and good
        print("%-58s %s%s" % (what, "ok" if good else "FAIL", "" if good else ": got %r, want %r" % (got, want)))

    yarn = {"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
            "original_max_position_embeddings": 8192}
    # config.json dicts in the three layouts (what export-hf writes is (a))
    a = {"rope_theta": 500000.0, "rope_scaling": dict(yarn)}
    b = {"rope_parameters": dict(yarn, rope_theta=500000.0)}
    c = {"rope_parameters": {"full_attention": dict(yarn, rope_theta=500000.0),
                             "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}}}
    for name, cfg, sliding in (("legacy", a, "yarn"), ("flat", b, "yarn"), ("per_layer_type", c, "default")):
        expect("layout of the %s dict" % name, layout(cfg), name)
        expect("%s: full layers' theta, type, factor" % name,
               (rope_of(cfg, "full_attention")["rope_theta"], rope_of(cfg)["rope_type"], rope_of(cfg)["factor"]),
               (500000.0, "yarn", 8.0))
        expect("%s: sliding layers' type" % name, rope_of(cfg, "sliding_attention")["rope_type"], sliding)
    expect("legacy without scaling", rope_of({"rope_theta": 1e4, "rope_scaling": None}), {"rope_type": "default", "rope_theta": 1e4})
    expect("legacy 'type' spelling", rope_of({"rope_theta": 1e4, "rope_scaling": {"type": "linear", "factor": 2}})["rope_type"], "linear")
    expect("flat without theta falls back to the attribute",
           rope_of({"rope_parameters": {"rope_type": "default"}, "rope_theta": 7.0})["rope_theta"], 7.0)
    try:
        rope_of({"rope_parameters": {"rope_type": "default"}})
        expect("no theta anywhere raises", "no error", "ValueError")
    except ValueError:
        expect("no theta anywhere raises", "ValueError", "ValueError")
    expect("empty rope_parameters reads as legacy", layout({"rope_parameters": {}, "rope_theta": 3.0}), "legacy")

    # config classes standing in for Olmo3Config of each transformers generation
    class Legacy:   # 4.x: rope_theta / rope_scaling keywords
        def __init__(self, num_hidden_layers=32, rope_theta=10000.0, rope_scaling=None, **kw):
            self.rope_theta, self.rope_scaling = rope_theta, rope_scaling

    class Flat:     # 5.x flat: rope_parameters; a legacy rope_theta keyword is folded in
        def __init__(self, num_hidden_layers=32, rope_parameters=None, **kw):
            self.rope_parameters = rope_parameters or {"rope_type": "default", "rope_theta": kw.pop("rope_theta", 10000.0)}

    class PerType:  # 5.x per layer type, defaults as transformers' Olmo3Config (theta 500000)
        def __init__(self, num_hidden_layers=32, rope_parameters=None, **kw):
            rp = rope_parameters or {lt: {"rope_type": "default"} for lt in LAYER_TYPES}
            for lt in LAYER_TYPES:
                rp.setdefault(lt, {"rope_type": "default"}).setdefault("rope_theta", kw.get("rope_theta", 500000.0))
            self.rope_parameters = rp

    for cls, want in ((Legacy, "legacy"), (Flat, "flat"), (PerType, "per_layer_type")):
        kw = olmo3_rope_kwargs(cls, 123456.0)
        cfg = cls(num_hidden_layers=2, **kw)
        expect("%s class: layout %s, kwargs %s" % (cls.__name__, layout(cfg), sorted(kw)), layout(cfg), want)
        try:
            check_theta(cfg, 123456.0)
            expect("%s class: theta 123456 on every layer type" % cls.__name__, True, True)
        except ValueError as e:
            expect("%s class: theta 123456 on every layer type" % cls.__name__, str(e), True)
    try:   # a theta the class ignored must be caught
        check_theta(PerType(num_hidden_layers=2), 123456.0)
        expect("check_theta catches an ignored theta", "passed", "ValueError")
    except ValueError:
        expect("check_theta catches an ignored theta", "ValueError", "ValueError")
    print(summary(c))
    print("SELFTEST %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(selftest() if "--selftest" in sys.argv[1:] else (print(__doc__) or 2))
