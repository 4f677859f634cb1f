/* admin: the management plane's and the definitions' one view of the
 * broker -- the server's vhosts and connections, and, through the module
 * headers below it, what the management API lists and changes. mgmt-ui/
 * and definitions/ include this header and no other broker header. */
#ifndef WARREN_ADMIN_H
#define WARREN_ADMIN_H

#include "../conn/conn.h"

#endif
