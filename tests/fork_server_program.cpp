// A fork server program for test_fork_server_program: what a program that starts
// its server by exec (start_fork_server(program)) ships, as the Python module does.
#include "hogwild/fork_server.hpp"

int main(int argc, char** argv) { return hogwild::fork_server_main(argc, argv); }
