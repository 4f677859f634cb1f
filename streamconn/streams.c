/* Commands on streams after Open. */
#include "sconn_int.h"

bool sc_command(sconn *c, const sp_command *cmd)
{
    (void)c, (void)cmd;
    return false;
}

void sc_forget_streams(sconn *c) { (void)c; }

void sc_flush_confirms(sconn *c) { (void)c; }
