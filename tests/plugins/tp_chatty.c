/*
 * A plugin that writes to stdout when it is loaded, initialised and
 * self-tested, as a vendor's forgotten debug output would: through stdio
 * (flushed and not) and straight to file descriptor 1. `edgert ... --json`
 * must still print exactly one JSON document on stdout (tests/tools/test_cli.c).
 * It is otherwise the honest test plugin of tp_common.h, named test-chatty.
 */
#include <unistd.h>

#define TP_NAME "test-chatty"
#define TP_ENTRY_NAME tp_chatty_honest_entry /* the entry below wraps its descriptor */
#include "tp_common.h"

static void say(const char *where)
{
    static const char raw[] = "tp_chatty: straight to fd 1 {\"not\": json\n";
    printf("tp_chatty: hello from %s, on stdout {\"not\": json\n", where);
    fflush(stdout);
    if (write(STDOUT_FILENO, raw, sizeof raw - 1) < 0)
        return;
    printf("tp_chatty: %s, left in stdio's buffer until exit\n", where);
}

__attribute__((constructor)) static void tp_chatty_on_load(void)
{
    say("the constructor");
}

static edgert_status chatty_init(const edgert_host *host, const char *options, void **state,
                                 char *err, size_t err_len)
{
    say("init");
    return tp_init(host, options, state, err, err_len);
}

static edgert_status chatty_self_test(void *state, char *err, size_t err_len)
{
    say("self_test");
    return tp_self_test(state, err, err_len);
}

EDGERT_PLUGIN_EXPORT edgert_status edgert_plugin_entry(uint32_t abi_min, uint32_t abi_max,
                                                       const edgert_host *host,
                                                       const edgert_plugin **out, char *err,
                                                       size_t err_len)
{
    static tp_descriptor_t chatty;
    (void)host;
    say("the entry");
    chatty = tp_d1;
    chatty.base.init = chatty_init;
    chatty.base.self_test = chatty_self_test;
    const edgert_plugin *const by_abi[1] = {&chatty.base};
    return EDGERT_PLUGIN_NEGOTIATE(abi_min, abi_max, by_abi, TP_NAME, out, err, err_len);
}
