"""C++ of the batch harness's sequence loop, appended to :data:`._harness_cpp.HARNESS_CPP`
only for designs whose first stage is recurrent (``design.json`` ``sequence``), so the
harness source -- and the cache key -- of every other design is unchanged.

``fh_run_seq`` streams ``n`` packets of different lengths: packet ``v`` is
``in_beats[v]`` input beats (TLAST on its last) and gives ``out_beats[v]`` output beats
(``m_axis_tlast`` checked on its last); otherwise as ``fh_run`` (random gaps and
back-pressure, per-packet timestamps, status 0 / 1 hang / 2 tlast off its place).
"""

SEQ_CPP = r"""
extern "C" {

int fh_run_seq(void* p, const int8_t* in, int64_t n, const int64_t* in_beats,
               uint8_t* out, const int64_t* out_beats, int64_t* ts,
               uint32_t valid_permille, uint32_t ready_permille, uint64_t seed,
               int64_t max_idle, int64_t* cycles_out, int64_t* done_out) {
    H* h = static_cast<H*>(p);
    Vaccel* d = h->dut;
    int64_t total_in = 0, total_out = 0;
    for (int64_t v = 0; v < n; v++) { total_in += in_beats[v]; total_out += out_beats[v]; }
    const uint64_t start = h->cycle;
    uint64_t rng = seed * 2654435761ULL + 0x9E3779B97F4A7C15ULL;
    int64_t ib = 0, ob = 0, idle = 0;
    int64_t iv = 0, ipos = 0, ov = 0, opos = 0;  // packet and beat within it
    bool src_valid = false;
    int status = 0;
    d->s_axil_awvalid = 0; d->s_axil_wvalid = 0; d->s_axil_arvalid = 0;
    while (ob < total_out) {
        if (!src_valid && ib < total_in) {
            src_valid = valid_permille >= 1000 || (xorshift(rng) % 1000) < valid_permille;
            if (src_valid) {
                put(d->s_axis_tdata, reinterpret_cast<const uint8_t*>(in) + ib * IN_BYTES,
                    IN_BYTES);
                d->s_axis_tlast = ipos == in_beats[iv] - 1;
            }
        }
        d->s_axis_tvalid = src_valid;
        bool ready = ready_permille >= 1000 || (xorshift(rng) % 1000) < ready_permille;
        d->m_axis_tready = ready;
        half_low(h);
        const bool s_fire = src_valid && d->s_axis_tready;
        const bool m_fire = ready && d->m_axis_tvalid;
        const int64_t now = (int64_t)(h->cycle - start);
        if (m_fire) {
            get(d->m_axis_tdata, out + ob * OUT_BYTES, OUT_BYTES);
            const bool end = opos == out_beats[ov] - 1;
            if ((bool)d->m_axis_tlast != end) status = 2;
            if (opos == 0) ts[4 * ov + 2] = now;
            if (end) { ts[4 * ov + 3] = now; ov++; opos = 0; } else opos++;
            ob++;
        }
        if (s_fire) {
            const bool end = ipos == in_beats[iv] - 1;
            if (ipos == 0) ts[4 * iv + 0] = now;
            if (end) { ts[4 * iv + 1] = now; iv++; ipos = 0; } else ipos++;
            ib++;
            src_valid = false;
        }
        half_high(h);
        idle = (s_fire || m_fire) ? 0 : idle + 1;
        if (idle > max_idle) { status = 1; break; }
    }
    d->s_axis_tvalid = 0;
    d->m_axis_tready = 0;
    *cycles_out = (int64_t)(h->cycle - start);
    *done_out = ov;
    return status;
}

}  // extern "C"
"""
