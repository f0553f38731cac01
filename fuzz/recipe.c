// Fuzz recipe_load: the input is a YAML file, optionally followed by a line "#OVERRIDES"
// and then one key=value override per line.
#include "util.c"
#include "recipe/recipe.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
    char *s = fz_str(d, n);
    char *ovr[16];
    int novr = 0;
    char *mark = strstr(s, "#OVERRIDES\n");
    if (mark) {
        *mark = 0;
        for (char *q = mark + 11; *q && novr < 16;) {
            ovr[novr++] = q;
            char *nl = strchr(q, '\n');
            if (!nl) break;
            *nl = 0;
            q = nl + 1;
        }
    }
    const char *p = fz_write("recipe.yaml", s, strlen(s));
    static Recipe r;   // large (paths tables)
    FZ_TRY {
        recipe_load(&r, p, novr, ovr);
        ModelConfig c = recipe_model_config(&r);
        (void)c;
        (void)recipe_total_steps(&r);
        free(recipe_to_yaml(&r));
        FZ_DONE;
    }
    free(s);
    unlink(p);
    return 0;
}
