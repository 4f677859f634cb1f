/* Content-header decoding (amqp/): a content header frame's payload --
 * class, weight, body size, property flags and list. What decodes has
 * properties that decode, encode, and re-decode and re-encode to the same
 * bytes. */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_check_header(data, size);
    return 0;
}
