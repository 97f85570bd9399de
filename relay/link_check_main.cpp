// The main() of relay/CMakeLists.txt's link checks: each links one room's objects alone with
// the libraries that room may use. Never run.
int main() { return 0; }
