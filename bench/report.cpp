// Formatting of the benchmark results: a fixed-width table, JSON Lines (nlohmann::json), Markdown.
#include "bench/report.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

namespace impulse::bench {
namespace {

using Json = nlohmann::ordered_json;

// Rounds to `decimals` places so the JSON shows what the measurement resolves, not float noise.
double round_to(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

double drift_of(const EngineResult& e) { return static_cast<double>(length(e.top_end - e.top_start)); }
double dy_of(const EngineResult& e) { return static_cast<double>(e.top_end.y - e.top_start.y); }

std::string format_asleep(const std::optional<double>& asleep_at_s, bool sleep, double simulated_s) {
  char buffer[64];
  if (!sleep) return "sleep off";
  if (asleep_at_s) {
    std::snprintf(buffer, sizeof buffer, "%.2f s", *asleep_at_s);
  } else {
    std::snprintf(buffer, sizeof buffer, "not asleep by %.2f s", simulated_s);
  }
  return buffer;
}

std::string format_rss(const std::optional<RssMeasurement>& rss) {
  if (!rss) return "not measured";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%llu KiB", static_cast<unsigned long long>(rss->growth_kib));
  return buffer;
}

Json json_or_null(const std::optional<double>& value, int decimals) {
  return value ? Json(round_to(*value, decimals)) : Json(nullptr);
}

Json rss_or_null(const std::optional<RssMeasurement>& rss) {
  return rss ? Json(rss->growth_kib) : Json(nullptr);
}

// Field readers for --summary: a file is untrusted input, so every type is checked.
std::optional<double> number_at(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string text_at(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return "-";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_boolean()) return it->get<bool>() ? "on" : "off";
  return "-";
}

std::string fixed(const std::optional<double>& value, int decimals, const char* unit = "") {
  if (!value) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f%s", decimals, *value, unit);
  return buffer;
}

}  // namespace

void print_human(std::FILE* out, const SceneResult& r) {
  const double simulated_s = static_cast<double>(r.steps) * scenes::kSceneDt;
  std::fprintf(out, "%s, n=%u, sleep %s, %d steps of 1/60 s x %d round(s), alternating chunks of %d steps\n",
               r.scene.c_str(), r.n, r.sleep ? "on" : "off", r.steps, r.rounds, r.chunk_steps);
  std::fprintf(out, "Impulse: %d step thread(s)%s\n", r.impulse_threads,
               r.impulse_threads > 1 ? " (WorkerPool)" : "");
  if (r.bullet_run) {
    std::fprintf(out,
                 "Bullet 3.24 (one thread): btDbvtBroadphase, sequential impulses 10 iterations, split impulse, "
                 "friction mix %s\n",
                 to_string(r.friction_mix));
  } else {
    std::fprintf(out, "Bullet: not run (--bullet off); its column and the ratios are 0\n");
  }
  std::fprintf(out, "  %-24s %22s %22s\n", "", "Impulse", "Bullet");
  std::fprintf(out, "  %-24s %22.3f %22.3f\n", "ms/step median", r.impulse.ms_median, r.bullet.ms_median);
  std::fprintf(out, "  %-24s %22.3f %22.3f\n", "ms/step p95", r.impulse.ms_p95, r.bullet.ms_p95);
  std::fprintf(out, "  %-24s %22s %22s\n", "peak RSS growth", format_rss(r.impulse.rss).c_str(),
               format_rss(r.bullet.rss).c_str());
  char awake_imp[32];
  char awake_bt[32];
  std::snprintf(awake_imp, sizeof awake_imp, "%u / %u", r.impulse.awake_end, r.n);
  std::snprintf(awake_bt, sizeof awake_bt, "%u / %u", r.bullet.awake_end, r.n);
  std::fprintf(out, "  %-24s %22s %22s\n", "awake at end", awake_imp, awake_bt);
  std::fprintf(out, "  %-24s %22.3f %22.3f\n", "us per awake body-step", r.impulse.us_per_awake_body_step,
               r.bullet.us_per_awake_body_step);
  std::fprintf(out, "  %-24s %22s %22s\n", "all asleep at",
               format_asleep(r.impulse.asleep_at_s, r.sleep, simulated_s).c_str(),
               format_asleep(r.bullet.asleep_at_s, r.sleep, simulated_s).c_str());
  if (r.has_top_body) {
    std::fprintf(out, "  %-24s %20.4f m %20.4f m\n", "top box drift (3D)", drift_of(r.impulse), drift_of(r.bullet));
    std::fprintf(out, "  %-24s %20.4f m %20.4f m\n", "top box height change", dy_of(r.impulse), dy_of(r.bullet));
  }
  std::fprintf(out, "  ratio Impulse/Bullet: %.3f (median of paired chunk ratios), %.3f (ratio of medians)\n",
               r.ratio_median, r.ratio_of_medians);
  const StageMedians& s = r.impulse_stages;
  std::fprintf(out,
               "  Impulse stages, median ms/step: broadphase %.3f  narrowphase %.3f  events %.3f  wake %.3f"
               "  solve %.3f  write-back %.3f  continuous %.3f  islands %.3f  total %.3f\n",
               s.broadphase_ms, s.narrowphase_ms, s.events_ms, s.wake_ms, s.solve_ms, s.writeback_ms, s.continuous_ms,
               s.islands_ms, s.total_ms);
  const physics::StepProfile& p = r.impulse_last_profile;
  std::fprintf(out, "  Impulse last step: %u pairs, %u contacts, %u points, %u awake, %u islands\n", p.pair_count,
               p.contact_count, p.point_count, p.awake_count, p.island_count);
  if (r.impulse.rss) {
    std::fprintf(out, "  RSS: growth of each engine alone in a forked child (method %s)\n", r.impulse.rss->method);
  }
}

std::string to_json_line(const SceneResult& r) {
  Json j;
  j["scene"] = r.scene;
  j["n"] = r.n;
  j["sleep"] = r.sleep;
  j["impulse_ms_median"] = round_to(r.impulse.ms_median, 4);
  j["impulse_ms_p95"] = round_to(r.impulse.ms_p95, 4);
  j["bullet_ms_median"] = round_to(r.bullet.ms_median, 4);
  j["bullet_ms_p95"] = round_to(r.bullet.ms_p95, 4);
  j["ratio_median"] = round_to(r.ratio_median, 4);
  j["impulse_rss_kib"] = rss_or_null(r.impulse.rss);
  j["awake_end"] = r.impulse.awake_end;
  if (r.has_top_body) j["top_drift_m"] = round_to(drift_of(r.impulse), 5);
  // Extra fields.
  j["steps"] = r.steps;
  j["rounds"] = r.rounds;
  j["chunk_steps"] = r.chunk_steps;
  j["impulse_threads"] = r.impulse_threads;
  j["bullet_run"] = r.bullet_run;
  j["ratio_of_medians"] = round_to(r.ratio_of_medians, 4);
  j["bullet_rss_kib"] = rss_or_null(r.bullet.rss);
  j["rss_method"] = r.impulse.rss ? Json(r.impulse.rss->method) : Json(nullptr);
  j["bullet_awake_end"] = r.bullet.awake_end;
  j["impulse_us_per_awake_body_step"] = round_to(r.impulse.us_per_awake_body_step, 4);
  j["bullet_us_per_awake_body_step"] = round_to(r.bullet.us_per_awake_body_step, 4);
  j["impulse_asleep_at_s"] = json_or_null(r.impulse.asleep_at_s, 4);
  j["bullet_asleep_at_s"] = json_or_null(r.bullet.asleep_at_s, 4);
  if (r.has_top_body) {
    j["bullet_top_drift_m"] = round_to(drift_of(r.bullet), 5);
    j["impulse_top_dy_m"] = round_to(dy_of(r.impulse), 5);
    j["bullet_top_dy_m"] = round_to(dy_of(r.bullet), 5);
  }
  j["bullet_friction_mix"] = to_string(r.friction_mix);
  const StageMedians& s = r.impulse_stages;
  j["impulse_profile_ms"] = {{"broadphase", round_to(s.broadphase_ms, 4)}, {"narrowphase", round_to(s.narrowphase_ms, 4)},
                             {"events", round_to(s.events_ms, 4)},         {"wake", round_to(s.wake_ms, 4)},
                             {"solve", round_to(s.solve_ms, 4)},           {"writeback", round_to(s.writeback_ms, 4)},
                             {"continuous", round_to(s.continuous_ms, 4)}, {"islands", round_to(s.islands_ms, 4)},
                             {"total", round_to(s.total_ms, 4)}};
  const physics::StepProfile& p = r.impulse_last_profile;
  j["impulse_last_step"] = {{"pairs", p.pair_count},
                            {"contacts", p.contact_count},
                            {"points", p.point_count},
                            {"awake", p.awake_count},
                            {"islands", p.island_count}};
  return j.dump();
}

bool write_trace_csv(const std::string& path, const SceneResult& result) {
  std::FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) return false;
  std::fprintf(file,
               "step,time_s,impulse_ms,bullet_ms,impulse_awake,bullet_awake,broadphase_ms,narrowphase_ms,"
               "events_ms,wake_ms,solve_ms,writeback_ms,continuous_ms,islands_ms,pairs,contacts,points,islands\n");
  for (size_t i = 0; i < result.trace.size(); ++i) {
    const TraceRow& row = result.trace[i];
    const physics::StepProfile& p = row.impulse_profile;
    std::fprintf(file, "%zu,%.4f,%.4f,%.4f,%u,%u,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%u,%u,%u,%u\n", i + 1,
                 static_cast<double>(i + 1) * scenes::kSceneDt, row.impulse_ms, row.bullet_ms, row.impulse_awake,
                 row.bullet_awake, p.broadphase_ms, p.narrowphase_ms, p.events_ms, p.wake_ms, p.solve_ms,
                 p.writeback_ms, p.continuous_ms, p.islands_ms, p.pair_count, p.contact_count, p.point_count, p.island_count);
  }
  return std::fclose(file) == 0;
}

int print_summary(std::FILE* out, const std::string& path) {
  std::ifstream in(path);
  if (!in) return -1;
  std::fprintf(out,
               "| scene | n | sleep | Impulse ms median / p95 | Bullet ms median / p95 | ratio (paired median) | "
               "RSS KiB Impulse / Bullet | awake at end Impulse / Bullet | asleep at Impulse / Bullet | "
               "S1 top drift Impulse / Bullet |\n");
  std::fprintf(out, "|---|---|---|---|---|---|---|---|---|---|\n");
  int rows = 0;
  int line_number = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    const Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::optional<double> imp_median = j.is_object() ? number_at(j, "impulse_ms_median") : std::nullopt;
    const std::optional<double> bt_median = j.is_object() ? number_at(j, "bullet_ms_median") : std::nullopt;
    if (!imp_median || !bt_median || text_at(j, "scene") == "-") {
      std::fprintf(stderr, "impulse-bench: %s:%d: skipped, not a result object\n", path.c_str(), line_number);
      continue;
    }
    const bool sleep = text_at(j, "sleep") == "on";
    auto asleep = [&](const char* key) {
      if (!sleep) return std::string("-");
      const std::optional<double> at = number_at(j, key);
      const std::optional<double> steps = number_at(j, "steps");
      if (at) return fixed(at, 2, " s");
      return steps ? "> " + fixed(*steps / 60.0, 1, " s") : std::string("no");
    };
    const std::string drift = number_at(j, "top_drift_m")
                                  ? fixed(number_at(j, "top_drift_m"), 4, " m") + " / " +
                                        fixed(number_at(j, "bullet_top_drift_m"), 4, " m")
                                  : std::string("-");
    std::fprintf(out, "| %s | %s | %s | %s / %s | %s / %s | %s | %s / %s | %s / %s | %s / %s | %s |\n",
                 text_at(j, "scene").c_str(), fixed(number_at(j, "n"), 0).c_str(), sleep ? "on" : "off",
                 fixed(imp_median, 3).c_str(), fixed(number_at(j, "impulse_ms_p95"), 3).c_str(),
                 fixed(bt_median, 3).c_str(), fixed(number_at(j, "bullet_ms_p95"), 3).c_str(),
                 fixed(number_at(j, "ratio_median"), 3).c_str(), fixed(number_at(j, "impulse_rss_kib"), 0).c_str(),
                 fixed(number_at(j, "bullet_rss_kib"), 0).c_str(), fixed(number_at(j, "awake_end"), 0).c_str(),
                 fixed(number_at(j, "bullet_awake_end"), 0).c_str(), asleep("impulse_asleep_at_s").c_str(),
                 asleep("bullet_asleep_at_s").c_str(), drift.c_str());
    ++rows;
  }
  return rows;
}

}  // namespace impulse::bench
