#include <x.h>
/* a
 b */ __global__ void k() { "s\"
"; }
