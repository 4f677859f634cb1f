/* Method decoding (amqp/, generated from the spec): a method frame's
 * payload. What decodes encodes, and re-decodes and re-encodes to the same
 * bytes; what does not decode says why (a reply code). */
#include "fuzz_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_check_method(data, size);
    return 0;
}
