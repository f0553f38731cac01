// mixture.h: a recipe's data.* and loader.* keys as the data loader's configuration
// (src/data/loader.h; docs/loader.md): sources, files, mixture shares and repeat caps.
#ifndef OLMO_MIXTURE_H
#define OLMO_MIXTURE_H

#include "data/loader.h"
#include "recipe/recipe.h"

// The data loader's configuration from a recipe: sources (data.paths = one source "data";
// data.sources items; globs expanded, sorted), data.mix shares, batch sizes, seed, order,
// loader.* switches. Bad input (no file matches, unknown source in data.mix, bad share):
// a message naming the key, exit 2. The file lists are malloc'd (recipe_loader_config_free).
void recipe_loader_config(const Recipe *r, LoaderConfig *out, int world_size, int rank);
void recipe_loader_config_free(LoaderConfig *c);

#endif
