/* Placeholder so the library has a source until the models module lands. */
#include "nn.h"
int nn_placeholder_unused;
