#include "optim/optimizer_options.h"

namespace acc {

const OptionSchema& optimizer_option_schema() {
  using T = OptionType;
  static const OptionSchema schema(OptionsKind::Optimizer, [](OptionSchema& s) {
    s.add("lr", T::Double, "learning rate").at_least(0);
    s.add("weight_decay", T::Double, "L2 penalty (decoupled for adamw, lion, adafactor; radam and nadam with decoupled_weight_decay)").at_least(0);
    s.add("momentum", T::Double, "sgd, rmsprop, sgd_schedule_free, sgd_8bit").at_least(0);
    s.add("dampening", T::Double, "sgd").at_least(0);
    s.add("nesterov", T::Bool, "sgd");
    s.add("beta1", T::Double, "first-moment decay").at_least(0).at_most(1);
    s.add("beta2", T::Double, "second-moment decay").at_least(0).at_most(1);
    s.add("eps", T::Double, "added to the denominator").at_least(0);
    s.add("amsgrad", T::Bool, "adam, adamw");
    s.add("alpha", T::Double,
          "rmsprop's and rmsprop_8bit's smoothing; asgd's power of the step size's decay; ademamix_8bit's weight of "
          "the slow moment")
        .at_least(0);
    s.add("beta3", T::Double, "ademamix_8bit: the slow first moment's decay").at_least(0).at_most(1);
    s.add("t_alpha", T::Int, "ademamix_8bit: steps over which alpha warms up (0: none)").at_least(0);
    s.add("t_beta3", T::Int, "ademamix_8bit: steps over which beta3 warms up (0: none)").at_least(0);
    s.add("centered", T::Bool, "rmsprop");
    s.add("lr_decay", T::Double, "adagrad").at_least(0);
    s.add("initial_accumulator_value", T::Double, "adagrad").at_least(0);
    s.add("eps1", T::Double, "adafactor, adalomo: regularizes the squared gradient").at_least(0);
    s.add("eps2", T::Double, "adafactor, adalomo: floor of the parameter scale").at_least(0);
    s.add("clip_threshold", T::Double, "adafactor, adalomo: update RMS clip").at_least(0);
    s.add("decay_rate", T::Double, "adafactor, adalomo: second-moment decay exponent").at_most(0);
    s.add("clip_grad_norm", T::Double,
          "lomo, adalomo: clip by the gradients' total norm (measured by a grad_norm pass)")
        .at_least(0);
    s.add("clip_grad_value", T::Double, "lomo, adalomo: clamp each gradient element").at_least(0);
    s.add("loss_scale", T::Double, "adalomo: the loss is multiplied by it and the gradients divided (0: none)")
        .at_least(0);
    s.add("scale_parameter", T::Bool, "adafactor: step size scaled by the parameter's RMS");
    s.add("relative_step", T::Bool, "adafactor: time-dependent step size instead of lr");
    s.add("warmup_init", T::Bool, "adafactor: warm-up of the relative step");
    s.add("decoupled_weight_decay", T::Bool, "radam, nadam: the weights decay as adamw's");
    s.add("momentum_decay", T::Double, "nadam: how fast the momentum's schedule moves").at_least(0);
    s.add("maximize", T::Bool, "every algorithm but lion and adafactor: ascend the loss (PyTorch's maximize)");
    s.add("foreach", T::Bool, "every algorithm but lion and adafactor: PyTorch's foreach rules (unset: its default)");
    s.add("fused", T::Bool, "sgd, adam, adamw, adagrad: PyTorch's fused=True kernels (PyTorch 2.4 or later)");
    s.add("rho", T::Double, "adadelta: the running averages' decay").at_least(0).at_most(1);
    s.add("etaminus", T::Double, "rprop: step size factor when the gradient's sign flips").at_least(0).at_most(1);
    s.add("etaplus", T::Double, "rprop: step size factor while the gradient keeps its sign").at_least(1);
    s.add("step_size_min", T::Double, "rprop: smallest step size").at_least(0);
    s.add("step_size_max", T::Double, "rprop: largest step size").at_least(0);
    s.add("lambd", T::Double, "asgd: decay term").at_least(0);
    s.add("t0", T::Double, "asgd: the step from which parameters are averaged").at_least(0);
    s.add("warmup_steps", T::Int, "schedule-free: steps of linear warmup of the rate").at_least(0);
    s.add("r", T::Double, "schedule-free: the averaging weights grow as step^r");
    s.add("weight_lr_power", T::Double, "schedule-free: the averaging weights grow as max rate^weight_lr_power");
    s.add("inner_momentum", T::Double, "adamw_schedule_free: an average of the gradient inside AdamW's update")
        .at_least(0)
        .at_most(1);
    s.add("min_8bit_size", T::Int, "bitsandbytes' 8-bit optimizers: parameters with fewer elements keep 32-bit moments")
        .at_least(0);
  });
  return schema;
}

}  // namespace acc
