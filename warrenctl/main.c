/* bin/warrenctl: rabbitmqctl's commands against Warren (or any broker's
 * management API). Everything is in wctl_main. */
#include "warrenctl.h"

int main(int argc, char **argv)
{
    return wctl_main(argc, argv);
}
