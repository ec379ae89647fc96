#include "schedule/schedule_form.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace acc {

Schedule closed_form(ScheduleRule rule) { return Schedule{std::move(rule), nullptr, nullptr}; }

Schedule chainable(Schedule::Next next, Schedule::Start start) {
  return Schedule{nullptr, std::move(start), std::move(next)};
}

ScheduleRule rule_of(Schedule schedule, std::optional<double> made_at) {
  if (schedule.closed_form) return std::move(schedule.closed_form);
  struct Walk {
    double base, lr;
    int64_t step;
  };
  return [next = std::move(schedule.next), start = std::move(schedule.start), made_at,
          walks = std::make_shared<std::vector<Walk>>()](double base, int64_t step) {
    const auto first = [&] { return Walk{base, start(made_at.value_or(base), base), 0}; };
    auto w = std::find_if(walks->begin(), walks->end(), [&](const Walk& x) { return x.base == base; });
    if (w == walks->end()) w = walks->insert(walks->end(), first());
    if (w->step > step) *w = first();  // an earlier step (a checkpoint): walk again
    for (; w->step < step; ++w->step) w->lr = next(w->lr, base, w->step + 1);
    return w->lr;
  };
}

Schedule chained(std::vector<Schedule> schedules) {
  // A closed form takes part as a recursion that ignores the rate it is handed.
  for (Schedule& s : schedules)
    if (s.closed_form) {
      ScheduleRule rule = std::move(s.closed_form);
      s = chainable([rule](double, double base, int64_t step) { return rule(base, step); },
                    [rule](double, double base) { return rule(base, 0); });
    }
  auto parts = std::make_shared<const std::vector<Schedule>>(std::move(schedules));
  return chainable(
      [parts](double lr, double base, int64_t step) {
        for (const Schedule& s : *parts) lr = s.next(lr, base, step);
        return lr;
      },
      [parts](double lr, double base) {
        for (const Schedule& s : *parts) lr = s.start(lr, base);
        return lr;
      });
}

}  // namespace acc
