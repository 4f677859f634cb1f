# Warren -- an AMQP 0-9-1 broker. `make run` builds and starts it, `make test`
# runs every test layer (codegen check, unit, integration, sanitizers).

CC       ?= cc
PKGS      = libevent libevent_openssl openssl sqlite3 jansson libpcre2-8 zlib
CFLAGS_COMMON = -std=c11 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
                -D_GNU_SOURCE -g -MMD -MP $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS    = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -levent_pthreads -lpthread -lm
TEST_LIBS = -lcmocka -lrabbitmq

# Two variants: release (optimised) and asan (AddressSanitizer + UBSan).
VARIANT  ?= release
ifeq ($(VARIANT),asan)
# gcc's "undefined" leaves out float-cast-overflow: named here.
SANITIZE = -fsanitize=address,undefined,float-cast-overflow
# and checks the invariants the design notes state (core.h's invariant())
CFLAGS_VARIANT = -O1 -fno-omit-frame-pointer $(SANITIZE) -fno-sanitize-recover=undefined,float-cast-overflow \
                 -DWARREN_INVARIANTS
LDFLAGS_VARIANT = $(SANITIZE)
else
CFLAGS_VARIANT = -O2
# The broker is linked with link-time optimisation: the small accessors that
# modules export to each other (conn_server, vhost_stats, ...) are inlined
# across files (17% fewer instructions per message). Its objects carry
# normal code too (fat), so the tests link them without the LTO step.
LTO_CFLAGS = -flto=auto -ffat-lto-objects
LDFLAGS_VARIANT =
WARREN_LDFLAGS = -O2 -flto=auto
NO_LTO = -fno-lto
endif
CFLAGS  += $(CFLAGS_COMMON) $(CFLAGS_VARIANT)
LDFLAGS += $(LDFLAGS_VARIANT)

B         = build/$(VARIANT)
LIB_SRCS  = $(filter-out broker/main.c,$(wildcard amqp/*.c dedup/*.c amqp10/*.c streamproto/*.c pattern/*.c http/*.c etcd/*.c mirror/*.c store/*.c stream/*.c routing/*.c net/*.c client/*.c core/*.c cluster/*.c access/*.c queue/*.c conn/*.c shovel/*.c streamconn/*.c admin/*.c broker/*.c mgmt-ui/*.c definitions/*.c federation/*.c))
LIB_OBJS  = $(LIB_SRCS:%.c=$(B)/%.o)
UNIT_SRCS = $(wildcard tests/unit/test_*.c)
UNIT_BINS = $(UNIT_SRCS:%.c=$(B)/%)
ITEST_SRCS = $(wildcard tests/integration/test_*.c)
ITEST_BINS = $(ITEST_SRCS:%.c=$(B)/%)
BENCH_SRCS = $(filter-out tests/bench/stream_perf.c tests/bench/delayed_perf.c,$(wildcard tests/bench/*.c))

WARREN    = $(B)/warren
# $(B)/warrenctl/ holds its objects, so the binary goes to $(B)/bin/
WARRENCTL = $(B)/bin/warrenctl
WCTL_OBJS = $(patsubst %.c,$(B)/%.o,$(filter-out warrenctl/main.c,$(wildcard warrenctl/*.c)))
WCTL_LIBS = $(shell pkg-config --libs jansson 2>/dev/null) -lm

.PHONY: all run test unit integration bench deps codegen check-codegen clean conformance \
        peer-suites unit-bins integration-bins soak fuzz fuzz-bins netfuzz cluster-test

all: deps $(WARREN) bin/warren bin/warrenctl

deps:
	@scripts/deps.sh

bin/warren: $(WARREN)
	@mkdir -p bin && cp $(WARREN) bin/warren

# warrenctl: rabbitmqctl's commands over the management API (warrenctl/).
bin/warrenctl: $(WARRENCTL)
	@mkdir -p bin && cp $(WARRENCTL) bin/warrenctl

$(WARRENCTL): $(B)/warrenctl/main.o $(WCTL_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(WCTL_LIBS)

$(WARREN): $(B)/broker/main.o $(B)/libwarren.a
	$(CC) $(LDFLAGS) $(WARREN_LDFLAGS) -o $@ $^ $(LDLIBS)

$(LIB_OBJS) $(B)/broker/main.o: CFLAGS += $(LTO_CFLAGS)

$(B)/libwarren.a: $(LIB_OBJS)
	@rm -f $@ && gcc-ar rcs $@ $^

$(B)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# Unit tests link only the modules they test, so each module builds alone.
AMQP_OBJS  = $(patsubst %.c,$(B)/%.o,$(wildcard amqp/*.c))
AMQP10_OBJS = $(patsubst %.c,$(B)/%.o,$(wildcard amqp10/*.c)) $(AMQP_OBJS)
DEDUP_OBJS = $(patsubst %.c,$(B)/%.o,$(wildcard dedup/*.c)) $(AMQP_OBJS)
ROUTE_OBJS = $(patsubst %.c,$(B)/%.o,$(wildcard routing/*.c)) $(AMQP_OBJS)
MIRROR_OBJS = $(patsubst %.c,$(B)/%.o,$(wildcard mirror/*.c))
STORE_OBJS = $(patsubst %.c,$(B)/%.o,$(wildcard store/*.c)) $(MIRROR_OBJS) $(AMQP_OBJS)
STREAM_OBJS = $(patsubst %.c,$(B)/%.o,$(wildcard stream/*.c)) $(MIRROR_OBJS)
HTTP_OBJS  = $(patsubst %.c,$(B)/%.o,$(wildcard http/*.c))
ETCD_OBJS  = $(patsubst %.c,$(B)/%.o,$(wildcard etcd/*.c))
NET_OBJS   = $(patsubst %.c,$(B)/%.o,$(wildcard net/*.c))
CLIENT_OBJS = $(patsubst %.c,$(B)/%.o,$(wildcard client/*.c)) $(NET_OBJS) $(AMQP_OBJS)
PATTERN_OBJS = $(patsubst %.c,$(B)/%.o,$(wildcard pattern/*.c))
STREAMPROTO_OBJS = $(patsubst %.c,$(B)/%.o,$(wildcard streamproto/*.c))

$(B)/tests/unit/test_amqp_%: tests/unit/test_amqp_%.c $(AMQP_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_streamproto_%: tests/unit/test_streamproto_%.c $(STREAMPROTO_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_amqp10_%: tests/unit/test_amqp10_%.c $(wildcard tests/unit/test_amqp10_*.h) $(AMQP10_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_route_%: tests/unit/test_route_%.c $(ROUTE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_dedup_%: tests/unit/test_dedup_%.c $(DEDUP_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_store_%: tests/unit/test_store_%.c $(STORE_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_stream_%: tests/unit/test_stream_%.c $(wildcard tests/unit/test_stream_*.h) $(STREAM_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_http_%: tests/unit/test_http_%.c $(HTTP_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_mirror_%: tests/unit/test_mirror_%.c $(wildcard tests/unit/test_mirror_*.h) $(MIRROR_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_etcd_%: tests/unit/test_etcd_%.c $(wildcard tests/unit/test_etcd_*.h) $(ETCD_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_net_%: tests/unit/test_net_%.c $(NET_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_client_%: tests/unit/test_client_%.c $(CLIENT_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_pattern_%: tests/unit/test_pattern_%.c $(PATTERN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_warrenctl_%: tests/unit/test_warrenctl_%.c $(WCTL_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(WCTL_LIBS) -lcmocka

$(B)/tests/unit/test_broker_%: tests/unit/test_broker_%.c $(B)/libwarren.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_streamconn_%: tests/unit/test_streamconn_%.c $(wildcard tests/unit/test_streamconn_*.h) $(B)/libwarren.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_definitions_%: tests/unit/test_definitions_%.c $(B)/libwarren.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_cluster_%: tests/unit/test_cluster_%.c $(B)/libwarren.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_federation_%: tests/unit/test_federation_%.c $(B)/libwarren.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

$(B)/tests/unit/test_mgmt_%: tests/unit/test_mgmt_%.c $(B)/libwarren.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(filter-out %.h,$^) $(LDLIBS) $(TEST_LIBS)

# Integration tests are clients: they talk to a broker process over TCP.
$(B)/tests/integration/%: tests/integration/%.c $(wildcard tests/integration/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $< $(TEST_LIBS) -lpthread

$(B)/warren-perf: $(BENCH_SRCS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $(BENCH_SRCS) -lrabbitmq -lpthread -lm

# The stream-protocol load generator (tests/bench/stream_perf.c, one file).
$(B)/stream-perf: tests/bench/stream_perf.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $< -lpthread

# The delayed-message benchmark's client (tests/bench/delayed_perf.c, one file).
$(B)/delayed-perf: tests/bench/delayed_perf.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) $(NO_LTO) -o $@ $< -lrabbitmq -lm

# The cluster tests' slow disk: an LD_PRELOAD shim delaying fsync/fdatasync
# (tests/cluster/slowsync.c), one for every variant (no sanitizer in it).
build/slowsync.so: tests/cluster/slowsync.c
	@mkdir -p build
	$(CC) -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -O2 -fPIC -shared -o $@ $< -ldl

# The codec is generated from the spec and committed; this regenerates it.
codegen:
	/usr/bin/python3 amqp/gen_codec.py amqp/amqp-rabbitmq-0.9.1.json amqp
	/usr/bin/python3 mgmt-ui/gen_assets.py

check-codegen:
	@scripts/check-codegen.sh

unit-bins: $(UNIT_BINS)
integration-bins: $(ITEST_BINS) $(WARREN) $(WARRENCTL)

run: all
	./bin/warren --config etc/warren.conf

test: deps
	@scripts/test.sh

bench: deps
	@$(MAKE) --no-print-directory VARIANT=release $(WARREN) $(B)/warren-perf
	@tests/bench/run.sh

# The soak (tests/soak/soak.py) for SOAK_S seconds (an hour by default) against
# $(VARIANT)'s broker; the TAP lines and the summary go to tests/soak/last-run.txt.
SOAK_S ?= 3600
soak: deps
	@$(MAKE) --no-print-directory $(WARREN)
	@SOAK_S=$(SOAK_S) WARREN_BIN=$(CURDIR)/$(WARREN) SOAK_REPORT=tests/soak/last-run.txt \
		/usr/bin/python3 tests/soak/soak.py

# The cluster tests' long run (tests/cluster): 50 leader kills in a row and a
# follower stopped for 30 s; the figures go to tests/cluster/last-long-run.txt.
cluster-test: deps
	@$(MAKE) --no-print-directory VARIANT=release $(WARREN) build/slowsync.so
	@WARREN_BIN=$(CURDIR)/$(WARREN) WARREN_CLUSTER_KILLS=50 WARREN_CLUSTER_STOP_S=30 \
		WARREN_CLUSTER_TEST_TIMEOUT=3600 WARREN_CLUSTER_RECORD=tests/cluster/last-long-run.txt \
		/usr/bin/python3 tests/cluster/test_cluster.py --tap

conformance: deps all
	@conformance/run.sh

peer-suites: deps all
	@conformance/peer/run.sh

# ---- fuzzing (tests/fuzz, tests/netfuzz) -----------------------------------
# libFuzzer harnesses, built with Debian's clang into build/fuzz/ from their
# own objects: the gcc flags above (-flto) do not suit clang. Every module is
# built with coverage for the fuzzer and ASan + UBSan (float-cast-overflow
# named, as gcc's variant does); one harness per tests/fuzz/fuzz_*.c.
# `make fuzz` runs each for FUZZ_S seconds (scripts/fuzz.sh says how),
# `make netfuzz` the network fuzzer for NETFUZZ_S (README: Fuzzing).
FUZZ_CC     = /usr/bin/clang
FUZZ_SAN    = -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all
FUZZ_CFLAGS = -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -g -O1 \
              -fno-omit-frame-pointer $(FUZZ_SAN) -DWARREN_INVARIANTS \
              $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
FB          = build/fuzz
FUZZ_OBJS   = $(LIB_SRCS:%.c=$(FB)/obj/%.o)
FUZZ_BINS   = $(patsubst tests/fuzz/%.c,$(FB)/%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_S     ?= 60

$(FB)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<

$(FB)/libwarren.a: $(FUZZ_OBJS)
	@rm -f $@ && ar rcs $@ $^

$(FB)/fuzz_%: tests/fuzz/fuzz_%.c $(wildcard tests/fuzz/*.h) $(FB)/libwarren.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -MMD -MP -o $@ $< $(FB)/libwarren.a $(LDLIBS)

fuzz-bins: $(FUZZ_BINS)

fuzz: deps fuzz-bins
	@FUZZ_S=$(FUZZ_S) scripts/fuzz.sh

# The network fuzzer (tests/netfuzz) against the ASan broker.
NETFUZZ_S ?= 300
netfuzz: deps
	@$(MAKE) --no-print-directory VARIANT=asan build/asan/warren
	@NETFUZZ_S=$(NETFUZZ_S) WARREN_BIN=$(CURDIR)/build/asan/warren /usr/bin/python3 tests/netfuzz/netfuzz.py

clean:
	rm -rf build bin

-include $(shell find build -path build/tools -prune -o -name '*.d' -type f -print 2>/dev/null)
