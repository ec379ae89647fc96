// Optimizers and learning-rate schedulers.
#include "guard.h"
#include "handles.h"
#include "host_callbacks.h"
#include "optim/group_hyperparameters.h"
#include "optim/optimizer_state.h"
#include "schedule/scheduler_composites.h"

using namespace acc::capi;

namespace {

// A scheduler over a host callback (named `what` in errors, NULL refused): make(optimizer, held
// user data) builds it once the arguments are checked.
template <typename Make>
acc_status create_callback_schedule(acc_optimizer* opt, bool callback_given, const char* what, void* user_data,
                                    acc_free_fn free_user_data, acc_scheduler** out, Make make) {
  return guarded([&] {
    auto data = hold_user_data(user_data, free_user_data);  // owned from here on, even if this call fails
    auto& o = live(opt, "opt");
    acc::require(callback_given, what, " is NULL");
    out_param(out, "out");
    emit(out, make(o.optimizer, std::move(data)));
  });
}

// The host's function of a step (or cycle) as a C++ one; `what` names it in a failure's message.
std::function<double(int64_t)> step_function(acc_lr_lambda_fn fn, std::shared_ptr<void> data, std::string what) {
  return [fn, data = std::move(data), what = std::move(what)](int64_t step) {
    double value = 0.0;
    invoke_host(what + " at step " + std::to_string(step), [&] { return fn(data.get(), step, &value); });
    return value;
  };
}

acc_status create_factor_schedule(acc_optimizer* opt, acc_lr_lambda_fn factor, const char* what, void* user_data,
                                  acc_free_fn free_user_data, acc_scheduler** out, acc::LambdaScheduler::FactorOf of) {
  return create_callback_schedule(
      opt, factor != nullptr, what, user_data, free_user_data, out, [&](auto optimizer, std::shared_ptr<void> data) {
        return std::make_shared<acc::LambdaScheduler>(
            optimizer, step_function(factor, std::move(data), std::string("the schedule's ") + what), of);
      });
}

// As create_factor_schedule with a factor of each parameter group's own; `groups` must be the
// optimizer's group count.
acc_status create_group_factor_schedule(acc_optimizer* opt, size_t groups, acc_lr_group_lambda_fn factor,
                                        const char* what, void* user_data, acc_free_fn free_user_data,
                                        acc_scheduler** out, acc::LambdaScheduler::FactorOf of) {
  return create_callback_schedule(
      opt, factor != nullptr, what, user_data, free_user_data, out, [&](auto optimizer, std::shared_ptr<void> data) {
        auto call = [factor, data = std::move(data), name = std::string(what)](size_t group, int64_t step) {
          double value = 0.0;
          invoke_host("the schedule's " + name + " of parameter group " + std::to_string(group) + " at step " +
                          std::to_string(step),
                      [&] { return factor(data.get(), group, step, &value); });
          return value;
        };
        return std::make_shared<acc::LambdaScheduler>(optimizer, call, groups, what, of);
      });
}

}  // namespace

extern "C" {

acc_status acc_optimizer_create(acc_model* model, const char* algorithm, const acc_options* opts,
                                acc_optimizer** out) {
  return guarded([&] {
    auto& m = live(model, "model");
    const std::string name = text_arg(algorithm, "algorithm");
    auto options = options_arg(opts, acc::OptionsKind::Optimizer);
    out_param(out, "out");
    emit(out, std::make_shared<acc::TorchOptimizer>(m.model, name, options));
  });
}

acc_status acc_optimizer_add_param_group(acc_optimizer* opt, const char* const* names, size_t n,
                                         const acc_options* overrides) {
  return guarded([&] {
    auto& o = *live(opt, "opt").optimizer;
    o.add_param_group(names_arg(names, n, "names"), options_arg(overrides, acc::OptionsKind::Optimizer));
  });
}

acc_status acc_optimizer_add_param_group_matching(acc_optimizer* opt, const char* patterns, const acc_options* overrides,
                                                  size_t* count) {
  return guarded([&] {
    auto& o = *live(opt, "opt").optimizer;
    const std::string text = text_arg(patterns, "patterns");
    const size_t moved = o.add_param_group_matching(text, options_arg(overrides, acc::OptionsKind::Optimizer));
    if (count) *count = moved;
  });
}

acc_status acc_optimizer_num_param_groups(const acc_optimizer* opt, size_t* out) {
  return guarded([&] { *out_param(out, "out") = live(opt, "opt").optimizer->num_param_groups(); });
}

acc_status acc_optimizer_get_lr(const acc_optimizer* opt, size_t group, double* out) {
  return guarded([&] {
    auto& o = *live(opt, "opt").optimizer;
    *out_param(out, "out") = o.lr(group);
  });
}

acc_status acc_optimizer_set_lr(acc_optimizer* opt, size_t group, double lr) {
  return guarded([&] { live(opt, "opt").optimizer->set_lr_by_hand(group, lr); });
}

acc_status acc_optimizer_step(acc_optimizer* opt) {
  return guarded([&] {
    acc::Optimizer& o = *live(opt, "opt").optimizer;
    o.require_unowned("acc_optimizer_step");
    o.step();
  });
}

acc_status acc_optimizer_zero_grad(acc_optimizer* opt) {
  return guarded([&] {
    acc::Optimizer& o = *live(opt, "opt").optimizer;
    o.require_unowned("acc_optimizer_zero_grad");
    o.zero_grad();
  });
}

acc_status acc_optimizer_set_training(acc_optimizer* opt, int training) {
  return guarded([&] { live(opt, "opt").optimizer->set_train_mode(training != 0); });
}

acc_status acc_optimizer_state(const acc_optimizer* opt, const char* param, const char* field, acc_tensor** out) {
  return guarded([&] {
    auto& o = *live(opt, "opt").optimizer;
    const std::string name = text_arg(param, "param");
    const std::string key = text_arg(field, "field");
    out_param(out, "out");
    emit(out, acc::parameter_state_field(o, name, key));
  });
}

acc_status acc_optimizer_state_fields(const acc_optimizer* opt, const char* param, acc_string_list** out) {
  return guarded([&] {
    auto& o = *live(opt, "opt").optimizer;
    const std::string name = text_arg(param, "param");
    out_param(out, "out");
    std::vector<std::string> names;
    for (const auto& f : acc::parameter_state(o, name)) names.push_back(f.first);
    emit(out, std::move(names));
  });
}

acc_status acc_optimizer_get_hyperparameter(const acc_optimizer* opt, size_t group, const char* key, double* out) {
  return guarded([&] {
    auto& o = *live(opt, "opt").optimizer;
    const std::string name = text_arg(key, "key");
    out_param(out, "out");
    *out = acc::group_hyperparameter(o, group, name);
  });
}

void acc_optimizer_free(acc_optimizer* opt) { release(opt); }

acc_status acc_scheduler_create(acc_optimizer* opt, const char* name, const acc_options* opts, acc_scheduler** out) {
  return guarded([&] {
    auto& o = live(opt, "opt");
    const std::string schedule = text_arg(name, "name");
    auto options = options_arg(opts, acc::OptionsKind::Scheduler);
    out_param(out, "out");
    emit(out, acc::make_scheduler(o.optimizer, schedule, options));
  });
}

acc_status acc_scheduler_create_lambda(acc_optimizer* opt, acc_lr_lambda_fn lambda, void* user_data,
                                       acc_free_fn free_user_data, acc_scheduler** out) {
  return create_factor_schedule(opt, lambda, "lambda", user_data, free_user_data, out,
                                acc::LambdaScheduler::FactorOf::BaseRate);
}

acc_status acc_scheduler_create_multiplicative(acc_optimizer* opt, acc_lr_lambda_fn factor, void* user_data,
                                               acc_free_fn free_user_data, acc_scheduler** out) {
  return create_factor_schedule(opt, factor, "factor", user_data, free_user_data, out,
                                acc::LambdaScheduler::FactorOf::RateBefore);
}

acc_status acc_scheduler_create_group_lambda(acc_optimizer* opt, size_t groups, acc_lr_group_lambda_fn lambda,
                                             void* user_data, acc_free_fn free_user_data, acc_scheduler** out) {
  return create_group_factor_schedule(opt, groups, lambda, "lambda", user_data, free_user_data, out,
                                      acc::LambdaScheduler::FactorOf::BaseRate);
}

acc_status acc_scheduler_create_group_multiplicative(acc_optimizer* opt, size_t groups, acc_lr_group_lambda_fn factor,
                                                     void* user_data, acc_free_fn free_user_data, acc_scheduler** out) {
  return create_group_factor_schedule(opt, groups, factor, "factor", user_data, free_user_data, out,
                                      acc::LambdaScheduler::FactorOf::RateBefore);
}

acc_status acc_scheduler_create_cyclic(acc_optimizer* opt, const acc_options* opts, acc_lr_lambda_fn scale,
                                       void* user_data, acc_free_fn free_user_data, acc_scheduler** out) {
  return create_callback_schedule(
      opt, scale != nullptr, "scale", user_data, free_user_data, out, [&](auto optimizer, std::shared_ptr<void> data) {
        return acc::make_cyclic_scheduler(optimizer, options_arg(opts, acc::OptionsKind::Scheduler),
                                          step_function(scale, std::move(data), "the scale function"));
      });
}

acc_status acc_scheduler_then(acc_scheduler* sched, int64_t milestone, const char* name, const acc_options* opts) {
  return guarded([&] {
    auto& s = live(sched, "sched");
    const std::string schedule = text_arg(name, "name");
    s.scheduler = acc::schedule_then(s.scheduler, milestone, schedule, options_arg(opts, acc::OptionsKind::Scheduler));
  });
}

acc_status acc_scheduler_chain(acc_scheduler* sched, const char* name, const acc_options* opts) {
  return guarded([&] {
    auto& s = live(sched, "sched");
    const std::string schedule = text_arg(name, "name");
    s.scheduler = acc::schedule_chain(s.scheduler, schedule, options_arg(opts, acc::OptionsKind::Scheduler));
  });
}

acc_status acc_scheduler_step(acc_scheduler* sched) {
  return guarded([&] { live(sched, "sched").scheduler->step(); });
}

acc_status acc_scheduler_step_metric(acc_scheduler* sched, double metric) {
  return guarded([&] { live(sched, "sched").scheduler->step_with_metric(metric); });
}

acc_status acc_scheduler_get_last_lr(const acc_scheduler* sched, size_t group, double* out) {
  return guarded([&] {
    auto& s = *live(sched, "sched").scheduler;
    *out_param(out, "out") = s.last_lr(group);
  });
}

acc_status acc_scheduler_get_step(const acc_scheduler* sched, int64_t* out) {
  return guarded([&] { *out_param(out, "out") = live(sched, "sched").scheduler->step_count(); });
}

void acc_scheduler_free(acc_scheduler* sched) { release(sched); }

}  // extern "C"
