"""One inference step of a pipeline stage: a prefill and decode steps, chained in one file (§5).

The prefill runs the prompt; each decode step one new token per sequence, attending the growing KV
cache; the LM head runs on the last positions only and samples; with pipeline parallelism each
stage sends its hidden state on and the last stage sends the sampled tokens back to the first
(``reference/workload-generators.md`` §5.1-5.3).

Example:
    >>> from chakra.generate.layout import Layout
    >>> from chakra.generate.specs import PRESETS, WorkloadSpec
    >>> spec = WorkloadSpec(PRESETS["llama3-8b"], step="inference", decode_steps=2)
    >>> st = StageBuilder(spec, Layout.of(spec.parallel), 0, {})
    >>> build_inference(st)
    >>> [n.name for n in st.tmpl.nodes if n.name.startswith("sample")]
    ['sample.prefill', 'sample.decode1', 'sample.decode2']
"""

from __future__ import annotations

from chakra.generate.transformer import TOKEN_ID_BYTES, StageBuilder
from chakra.schema.protobuf.et_def_pb2 import ALL_GATHER


def build_inference(st: StageBuilder) -> None:
    spec = st.spec
    stride = st.layout.stage_stride
    prompt = spec.prompt_len or spec.model.seq_len
    batch = spec.micro_batch
    last_offset = (st.p - 1) * stride
    for step in range(spec.decode_steps + 1):
        prefill = step == 0
        name = "prefill" if prefill else f"decode{step}"
        if prefill:
            st.set_tokens(batch, prompt)
        else:  # one new token per sequence, attending the cache plus itself
            st.set_tokens(batch, 1, kv_len=prompt + step)
        hidden_bytes = st.A
        x: int | None = None
        if st.is_first:
            if not prefill and st.p > 1:  # the tokens sampled by the last stage
                x = st.tmpl.p2p(
                    f"{name}.token.recv", send=False, size_bytes=TOKEN_ID_BYTES * batch, peer_offset=last_offset,
                    tag=2 * (step - 1) + 1,
                )  # fmt: skip
            x = st.embedding_forward(name, x)
        else:
            x = st.tmpl.p2p(f"{name}.recv", send=False, size_bytes=hidden_bytes, peer_offset=-stride, tag=2 * step)
        for layer in st.layers:
            x = st.layer_forward(layer, x, name)
        if not st.is_last:
            st.tmpl.p2p(f"{name}.send", send=True, size_bytes=hidden_bytes, peer_offset=stride, tag=2 * step, deps=[x])
            continue
        norm = st.norm(f"final_norm.{name}", x)
        head = st.gemm(f"lm_head.{name}", batch, st.h, st.vocab_r, "fwd", [norm])  # last positions only (§5.1)
        logits = st.coll(f"lm_head.{name}.tp_allgather", ALL_GATHER, batch * st.vocab_r * st.w_a, "tp", [head])
        sample = st.elem(f"sample.{name}", batch * st.vocab_r * st.t, 1, 1, [head, logits])
        if st.p > 1 and step < spec.decode_steps:
            st.tmpl.p2p(
                f"{name}.token.send", send=True, size_bytes=TOKEN_ID_BYTES * batch, peer_offset=-last_offset,
                tag=2 * step + 1, deps=[sample],
            )  # fmt: skip
