// The module's fork server (hogwild/fork_server.hpp): a small program that the
// module execs at import, so that every run's workers are forked from it rather
// than from a copy of the interpreter.
#include "hogwild/fork_server.hpp"

int main(int argc, char** argv) { return hogwild::fork_server_main(argc, argv); }
