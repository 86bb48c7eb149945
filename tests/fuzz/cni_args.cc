// CNI_ARGS strings.
#include "cni/args.h"
#include "fuzz.h"

TOPOCNI_FUZZ_TARGET(cni::Args::parse(input))
