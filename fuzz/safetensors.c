// Fuzz st_open (safetensors header + bounds) and st_read_f32 on every tensor.
#include "util.c"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    const char *p = fz_write("st.safetensors", d, n);
    StFile f;
    char err[512];
    if (st_open(&f, p, err, sizeof err) == 0) {
        for (int i = 0; i < f.n; i++) {
            const StTensor *t = st_find(&f, f.t[i].name);
            if (!t) abort();
            size_t ne = st_numel(t);
            if (ne > (64u << 20)) abort();   // validated against the file size
            float *dst = malloc(ne * 4 + 4);
            st_read_f32(&f, t, dst);
            free(dst);
        }
        st_close(&f);
    }
    unlink(p);
    return 0;
}
