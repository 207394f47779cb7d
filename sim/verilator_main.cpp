// The C++ main of every Verilator executable fpganet builds (fpganet.sim.runner.verilator_main
// writes it with the #defines below in front). It clocks the model, 10 time units a cycle,
// until the design calls $finish, or until its `done` output rises.
//
//   FPGANET_MODEL        the Verilated class, e.g. Vfpganet_harness (its header is included).
//   FPGANET_COUNT_BUSY   toggle coverage and cycles only while the `busy` output is high:
//                        writes coverage.dat and busy_cycles.txt when busy falls
//                        (fpganet.sim.activity).
//   FPGANET_TIMED_RUN    two cycles of `rst`, then runs until `done` and prints
//                        {"cycles", "wall_s", "checksum"} as JSON (fpganet.sim.bench).
#define FPGANET_STRING(text) #text
#define FPGANET_HEADER(model) FPGANET_STRING(model.h)
#include FPGANET_HEADER(FPGANET_MODEL)
#include "verilated.h"
#ifdef FPGANET_COUNT_BUSY
#include "verilated_cov.h"
#include <cstdio>
#endif
#ifdef FPGANET_TIMED_RUN
#include <chrono>
#include <cstdio>
#endif

// One clock cycle; `on_rising_edge` runs between the rising and the falling edge.
template <typename OnRisingEdge>
static void cycle(VerilatedContext* context, FPGANET_MODEL* top, OnRisingEdge on_rising_edge) {
    context->timeInc(5);
    top->clk = 1;
    top->eval();
    on_rising_edge();
    context->timeInc(5);
    top->clk = 0;
    top->eval();
}

int main(int argc, char** argv) {
    VerilatedContext* context = new VerilatedContext;
    context->commandArgs(argc, argv);
    FPGANET_MODEL* top = new FPGANET_MODEL{context};
    top->clk = 0;
    top->eval();
#ifdef FPGANET_TIMED_RUN
    top->rst = 1;
    for (int i = 0; i < 2; i++) cycle(context, top, [] {});
    top->rst = 0;
    auto start = std::chrono::steady_clock::now();
    while (!top->done) cycle(context, top, [] {});
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("{\"cycles\": %u, \"wall_s\": %.6f, \"checksum\": %d}\n",
                (unsigned)top->cycles, wall, (int)top->checksum);
#elif defined(FPGANET_COUNT_BUSY)
    unsigned long long busy_cycles = 0;
    bool was_busy = false, written = false;
    auto count_busy = [&] {
        bool busy = top->busy;
        // busy rises in the cycle after start: everything before (boot loading) is forgotten.
        if (busy && !was_busy) {
            context->coveragep()->zero();
            busy_cycles = 0;
        }
        if (busy) busy_cycles++;
        if (!busy && was_busy && !written) {
            context->coveragep()->write("coverage.dat");
            FILE* out = std::fopen("busy_cycles.txt", "w");
            std::fprintf(out, "%llu\n", busy_cycles);
            std::fclose(out);
            written = true;
        }
        was_busy = busy;
    };
    while (!context->gotFinish()) cycle(context, top, count_busy);
#else
    while (!context->gotFinish()) cycle(context, top, [] {});
#endif
    top->final();
    delete top;
    delete context;
    return 0;
}
