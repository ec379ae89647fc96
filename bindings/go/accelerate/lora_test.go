package accelerate_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

func seededTwoLinears(t *testing.T) *acc.Model {
	t.Helper()
	if err := acc.SetSeed(3); err != nil {
		t.Fatal(err)
	}
	return newTwoLinears(t)
}

func outputOf(t *testing.T, m *acc.Model) []float32 {
	t.Helper()
	x, _ := acc.FromFloat32s([]float32{0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8}, 2, 4)
	defer x.Close()
	return forwardNoGrad(t, m, x)
}

// transformers' load_in_4bit: QLoRA's base model keeps 4-bit weights, and its adapters train.
func TestFourBitBaseModelTrainsItsAdapters(t *testing.T) {
	trainsAdaptersOverQuantisedLayers(t, func(m *acc.Model) {
		if _, err := m.Quantize4bit(`{"load_in_8bit": true}`); !errors.Is(err, acc.ErrInvalidArgument) {
			t.Fatalf("load_in_8bit: %v, want ErrInvalidArgument", err)
		}
		// The output layer stays as it is, as transformers leaves it.
		if n, err := m.Quantize4bit(`{"load_in_4bit": true, "bnb_4bit_quant_type": "nf4"}`); n != 1 || err != nil {
			t.Fatalf("Quantize4bit = %d, %v", n, err)
		}
		// A float32 model: nothing to cast, everything frozen.
		if n, err := m.PrepareForKbitTraining(); n != 0 || err != nil {
			t.Fatalf("PrepareForKbitTraining = %d, %v", n, err)
		}
	})
}

// transformers' load_in_8bit: LLM.int8 layers keep int8 weights, and LoRA's adapters on them train.
func TestEightBitBaseModelTrainsItsAdapters(t *testing.T) {
	trainsAdaptersOverQuantisedLayers(t, func(m *acc.Model) {
		if n, err := m.Quantize(`{"load_in_8bit": true, "llm_int8_threshold": 6.0}`); n != 1 || err != nil {
			t.Fatalf("Quantize = %d, %v", n, err)
		}
	})
}

// PEFT's replace_lora_weights_loftq: the 4-bit layer's adapters restart from LoftQ's factors of its
// quantisation error against the unquantised weights of a safetensors file (lora_B no longer zero).
func TestReplaceLoraWeightsLoftqRestartsFourBitAdapters(t *testing.T) {
	spec := seededTwoLinears(t)
	dir := t.TempDir()
	file, weights := filepath.Join(dir, "model.pt"), filepath.Join(dir, "model.safetensors")
	if err := spec.SaveTorchScript(file); err != nil {
		t.Fatal(err)
	}
	state, err := spec.StateDict()
	if err != nil {
		t.Fatal(err)
	}
	if err := state.SaveSafetensors(weights); err != nil {
		t.Fatal(err)
	}
	state.Close()
	spec.Close()
	m, err := acc.LoadTorchScript(file)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if n, err := m.Quantize4bit(`{"load_in_4bit": true}`); n != 1 || err != nil {
		t.Fatalf("Quantize4bit = %d, %v", n, err)
	}
	if _, err := m.ReplaceLoraWeightsLoftq(weights, ""); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("without adapters: %v, want ErrInvalidArgument", err)
	}
	o, _ := acc.NewOptions(acc.LoraOptions)
	defer o.Close()
	_ = o.SetInt("r", 2)
	if n, err := m.AddLora("0", o); n != 1 || err != nil {
		t.Fatalf("AddLora = %d, %v", n, err)
	}
	if n, err := m.ReplaceLoraWeightsLoftq(weights, "default"); n != 1 || err != nil {
		t.Fatalf("ReplaceLoraWeightsLoftq = %d, %v", n, err)
	}
	zero := true
	for _, v := range paramValues(t, m, "0.lora_B.weight") {
		zero = zero && v == 0
	}
	if zero {
		t.Fatal("lora_B is still zero")
	}
}

// The test model saved as TorchScript and loaded back, quantised by quantize, then LoRA on its
// first layer trains.
func trainsAdaptersOverQuantisedLayers(t *testing.T, quantize func(m *acc.Model)) {
	spec := seededTwoLinears(t)
	file := filepath.Join(t.TempDir(), "model.pt")
	if err := spec.SaveTorchScript(file); err != nil {
		t.Fatal(err)
	}
	spec.Close()
	m, err := acc.LoadTorchScript(file)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	quantize(m)
	if n, err := m.AddLora("0", nil); n != 1 || err != nil {
		t.Fatalf("AddLora = %d, %v", n, err)
	}
	b := paramValues(t, m, "0.lora_B.weight")
	lr, _ := acc.NewOptions(acc.OptimizerOptions)
	defer lr.Close()
	_ = lr.SetFloat("lr", 0.1)
	opt, err := acc.NewOptimizer(m, "adamw", lr)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	for i := 0; i < 3; i++ {
		trainStep(t, m, opt)
	}
	if reflect.DeepEqual(b, paramValues(t, m, "0.lora_B.weight")) {
		t.Error("the adapter did not train")
	}
}

// LoRA adapters: only they train, PEFT's files round-trip, merging keeps the outputs.
func TestLoraAdaptersTrainAloneAndRoundTrip(t *testing.T) {
	m := seededTwoLinears(t)
	defer m.Close()
	o, _ := acc.NewOptions(acc.LoraOptions)
	defer o.Close()
	if err := o.SetInt("r", 2); err != nil {
		t.Fatal(err)
	}
	if n, err := m.AddLora("0,1", o); n != 2 || err != nil {
		t.Fatalf("AddLora = %d, %v", n, err)
	}
	if m.LoraCount() != 2 {
		t.Fatalf("LoraCount = %d", m.LoraCount())
	}
	base, b := paramValues(t, m, "1.weight"), paramValues(t, m, "1.lora_B.weight")
	lr, _ := acc.NewOptions(acc.OptimizerOptions)
	defer lr.Close()
	_ = lr.SetFloat("lr", 0.1)
	opt, err := acc.NewOptimizer(m, "adamw", lr)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		trainStep(t, m, opt)
	}
	opt.Close()
	if !reflect.DeepEqual(base, paramValues(t, m, "1.weight")) {
		t.Error("a base weight changed")
	}
	if reflect.DeepEqual(b, paramValues(t, m, "1.lora_B.weight")) {
		t.Error("an adapter did not train")
	}
	trained := outputOf(t, m)
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := m.SaveLora(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "adapter_config.json")); err != nil {
		t.Fatal(err)
	}
	fresh := seededTwoLinears(t)
	defer fresh.Close()
	if err := fresh.LoadLora(dir); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(trained, outputOf(t, fresh)) {
		t.Error("loaded adapters compute otherwise")
	}
	if err := fresh.MergeLora(); err != nil || fresh.LoraCount() != 0 {
		t.Fatalf("MergeLora: %v, %d left", err, fresh.LoraCount())
	}
	for i, v := range outputOf(t, fresh) {
		if d := v - trained[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("merged output %d differs by %g", i, d)
		}
	}
	if _, err := m.AddLora("q_proj", nil); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "already has") {
		t.Errorf("AddLora twice: %v", err)
	}
}

// WithoutLora is PEFT's disable_adapter(): the base model's outputs inside, the adapters' after.
func TestWithoutLoraComputesAsTheBaseModel(t *testing.T) {
	m := seededTwoLinears(t)
	defer m.Close()
	base := outputOf(t, m)
	o, _ := acc.NewOptions(acc.LoraOptions)
	defer o.Close()
	if err := o.Set("init_lora_weights", "false"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddLora("0,1", o); err != nil || !m.IsLoraEnabled() {
		t.Fatalf("AddLora: %v, enabled %v", err, m.IsLoraEnabled())
	}
	adapted := outputOf(t, m)
	if reflect.DeepEqual(base, adapted) {
		t.Fatal("the adapters change nothing")
	}
	err := m.WithoutLora(func() error {
		if m.IsLoraEnabled() || !reflect.DeepEqual(base, outputOf(t, m)) {
			t.Error("disabled adapters: not the base model's outputs")
		}
		return nil
	})
	if err != nil || !m.IsLoraEnabled() || !reflect.DeepEqual(adapted, outputOf(t, m)) {
		t.Fatalf("after WithoutLora: %v, enabled %v", err, m.IsLoraEnabled())
	}
	if err := m.SetLoraEnabled(false); err != nil {
		t.Fatal(err)
	}
	if err := m.WithoutLora(func() error { return nil }); err != nil || m.IsLoraEnabled() {
		t.Fatalf("disabled before WithoutLora: %v, enabled %v after it", err, m.IsLoraEnabled())
	}
	plain := seededTwoLinears(t)
	defer plain.Close()
	if err := plain.WithoutLora(func() error { return nil }); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "no LoRA adapters") {
		t.Errorf("WithoutLora without adapters: %v", err)
	}
}

const tokenSpec = `[{"type":"embedding","num_embeddings":6,"embedding_dim":4},
  {"type":"linear","in_features":4,"out_features":6}]`

func tokenOutput(t *testing.T, m *acc.Model) []float32 {
	t.Helper()
	ids, _ := acc.FromInt64s([]int64{1, 4, 2, 0}, 2, 2)
	defer ids.Close()
	return forwardNoGrad(t, m, ids)
}

func seededTokenModel(t *testing.T) *acc.Model {
	t.Helper()
	if err := acc.SetSeed(5); err != nil {
		t.Fatal(err)
	}
	m, err := acc.ModelFromSpec(tokenSpec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// PEFT's TrainableTokensConfig: rows of the input embedding train alone, PEFT's files round-trip.
func TestTrainableTokensTrainAloneAndRoundTrip(t *testing.T) {
	m := seededTokenModel(t)
	defer m.Close()
	base := tokenOutput(t, m)
	o, _ := acc.NewOptions(acc.TrainableTokensOptions)
	defer o.Close()
	if err := o.Set("token_indices", "1,4"); err != nil {
		t.Fatal(err)
	}
	if err := o.SetBool("init_weights", false); err != nil {
		t.Fatal(err)
	}
	if n, err := m.AddTrainableTokens("", o); n != 1 || err != nil {
		t.Fatalf("AddTrainableTokens = %d, %v", n, err)
	}
	names, _ := m.ParameterNames()
	if want := []string{"0.weight", "0.trainable_tokens_delta", "1.weight", "1.bias"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("parameters %v, want %v", names, want)
	}
	changed := tokenOutput(t, m)
	if reflect.DeepEqual(base, changed) {
		t.Fatal("random rows left the outputs as they were")
	}
	dir := filepath.Join(t.TempDir(), "tokens")
	if err := m.SaveLora(dir); err != nil {
		t.Fatal(err)
	}
	fresh := seededTokenModel(t)
	defer fresh.Close()
	if err := fresh.LoadLora(dir); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(changed, tokenOutput(t, fresh)) {
		t.Error("loaded rows compute otherwise")
	}
	if err := fresh.WithoutLora(func() error {
		if !reflect.DeepEqual(base, tokenOutput(t, fresh)) {
			t.Error("disabled rows do not give the base model")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddLora("1", nil); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Errorf("LoRA over trainable tokens: %v", err)
	}
}

// PEFT's IA3: a vector scaling the linear layer's input (a feedforward module) trains alone.
func TestIa3ScalesAndRoundTrips(t *testing.T) {
	m := seededTokenModel(t)
	defer m.Close()
	base := tokenOutput(t, m)
	o, _ := acc.NewOptions(acc.Ia3Options)
	defer o.Close()
	if err := o.Set("feedforward_modules", "1"); err != nil {
		t.Fatal(err)
	}
	if err := o.SetBool("init_ia3_weights", false); err != nil {
		t.Fatal(err)
	}
	if n, err := m.AddIa3("1", o); n != 1 || err != nil {
		t.Fatalf("AddIa3 = %d, %v", n, err)
	}
	names, _ := m.ParameterNames()
	if want := []string{"0.weight", "1.weight", "1.bias", "1.ia3_l"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("parameters %v, want %v", names, want)
	}
	changed := tokenOutput(t, m)
	if reflect.DeepEqual(base, changed) {
		t.Fatal("drawn vectors left the outputs as they were")
	}
	dir := filepath.Join(t.TempDir(), "ia3")
	if err := m.SaveLora(dir); err != nil {
		t.Fatal(err)
	}
	fresh := seededTokenModel(t)
	defer fresh.Close()
	if err := fresh.LoadLora(dir); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(changed, tokenOutput(t, fresh)) {
		t.Error("loaded vectors compute otherwise")
	}
	if err := fresh.WithoutLora(func() error {
		if !reflect.DeepEqual(base, tokenOutput(t, fresh)) {
			t.Error("disabled vectors do not give the base model")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddIa3("0", nil); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Errorf("IA3 on an embedding: %v", err)
	}
}

// PEFT's LoHa on the linear layer: drawn factors change the outputs; PEFT's files round-trip.
func TestLohaTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.LohaOptions, map[string]any{"r": 2, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddLoha("1", o) },
		"1.hada_w1_a", "1.hada_w1_b", "1.hada_w2_a", "1.hada_w2_b")
}

// PEFT's LoKr on the linear layer (6 x 4: w1 2 x 2 whole, w2 3 x 2 a rank-1 product).
func TestLokrTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.LokrOptions, map[string]any{"r": 1, "init_weights": "false"})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddLokr("1", o) }, "1.lokr_w1", "1.lokr_w2_a", "1.lokr_w2_b")
}

// PEFT's VeRA on the linear layer: its two vectors (the projections are frozen buffers).
func TestVeraTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.VeraOptions, map[string]any{"r": 2, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddVera("1", o) }, "1.vera_lambda_b", "1.vera_lambda_d")
}

// PEFT's OFT on the linear layer (4 inputs: 2 blocks of 2).
func TestOftTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.OftOptions, map[string]any{"oft_block_size": 2, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddOft("1", o) }, "1.oft_R.weight")
}

// PEFT's BOFT on the linear layer (4 inputs: blocks of 2, two butterfly factors).
func TestBoftTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.BoftOptions, map[string]any{
		"boft_block_size": 2, "boft_n_butterfly_factor": 2, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddBoft("1", o) }, "1.boft_R", "1.boft_s")
}

// PEFT's HRA on the linear layer (r 2, each reflection drawn).
func TestHraTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.HraOptions, map[string]any{"r": 2, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddHra("1", o) }, "1.hra_u")
}

// PEFT's FourierFT on the linear layer (8 of its spectrum's entries).
func TestFourierftTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.FourierftOptions, map[string]any{"n_frequency": 8, "scaling": 10.0})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddFourierft("1", o) }, "1.fourierft_spectrum")
}

// PEFT's MiSS on the linear layer (r 2, the shard drawn).
func TestMissTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.MissOptions, map[string]any{"r": 2, "init_weights": "false"})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddMiss("1", o) }, "1.miss_block")
}

// PEFT's C3A on the linear layer (blocks of 2, the kernel drawn).
func TestC3aTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.C3aOptions, map[string]any{"block_size": 2})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddC3a("1", o) }, "1.c3a_kernel")
}

// PEFT's SHiRA on the linear layer (r 1, the entries drawn).
func TestShiraTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.ShiraOptions, map[string]any{"r": 1, "random_seed": 3, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddShira("1", o) }, "1.shira_weight")
}

// PEFT's RandLoRA on the linear layer (r 2, lambda drawn; the bases are frozen buffers).
func TestRandloraTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.RandloraOptions, map[string]any{"r": 2, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddRandlora("1", o) },
		"1.randlora_lambda", "1.randlora_gamma")
}

// PEFT's DeLoRA on the linear layer (r 2, B drawn; the column norms are a frozen buffer).
func TestDeloraTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.DeloraOptions, map[string]any{"r": 2, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddDelora("1", o) },
		"1.delora_A", "1.delora_B", "1.delora_lambda")
}

// PEFT's RoAd on the linear layer (pairs of 2 of its 6 outputs, the angles and scales drawn).
func TestRoadTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.RoadOptions, map[string]any{"group_size": 2, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddRoad("1", o) }, "1.road_theta", "1.road_alpha")
}

// PEFT's GraLoRA on the linear layer (2 x 2 blocks of rank 1, a hybrid pair of rank 1, B drawn).
func TestGraloraTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.GraloraOptions, map[string]any{"r": 2, "hybrid_r": 1, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddGralora("1", o) },
		"1.gralora_A", "1.gralora_B", "1.gralora_A_general.weight", "1.gralora_B_general.weight")
}

// PEFT's HiRA on the linear layer (r 2, A and B as torch.randn drew them).
func TestHiraTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.HiraOptions, map[string]any{"r": 2, "init_weights": "false"})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddHira("1", o) }, "1.hira_A", "1.hira_B")
}

// PEFT's PVeRA on the linear layer (r 2, the vectors as torch.randn drew them).
func TestPveraTrainsAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.PveraOptions, map[string]any{"r": 2, "init_weights": false})
	defer o.Close()
	roundTrips(t, func(m *acc.Model) (int, error) { return m.AddPvera("1", o) }, "1.pvera_lambda_b", "1.pvera_lambda_d")
}

// PEFT's LN tuning on the linear layer (any module can be tuned): it trains in place, PEFT's files
// round-trip and unload puts the layer back.
func TestLnTuningTrainsInPlaceAndRoundTrips(t *testing.T) {
	m := seededTokenModel(t)
	defer m.Close()
	base := tokenOutput(t, m)
	if n, err := m.AddLnTuning("1", nil); n != 1 || err != nil {
		t.Fatalf("adding = %d, %v", n, err)
	}
	if !reflect.DeepEqual(base, tokenOutput(t, m)) {
		t.Fatal("the tuned module does not start as it was")
	}
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := m.SaveLora(dir); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil || !strings.Contains(string(config), `"LN_TUNING"`) {
		t.Fatalf("adapter_config.json: %s, %v", config, err)
	}
	fresh := seededTokenModel(t)
	defer fresh.Close()
	if err := fresh.LoadLora(dir); err != nil || fresh.LoraCount() != 1 {
		t.Fatalf("loading: %v, %d tuned", err, fresh.LoraCount())
	}
	if err := fresh.UnloadLora(); err != nil || fresh.LoraCount() != 0 {
		t.Fatalf("unloading: %v", err)
	}
}

// PEFT's AdaLoRA on the linear layer: trained on the regularized loss through its schedule (rank 4
// pruned to 2 by step 3), the pattern is saved as rank_pattern and PEFT's files round-trip.
func TestAdaloraTrainsPrunesAndRoundTrips(t *testing.T) {
	o := methodOptions(t, acc.AdaloraOptions, map[string]any{
		"total_step": 4, "init_r": 4, "target_r": 2, "tinit": 0, "tfinal": 1, "deltaT": 1})
	defer o.Close()
	config := roundTrips(t, func(m *acc.Model) (int, error) {
		n, err := m.AddAdalora("1", o)
		if err != nil {
			return n, err
		}
		lr, _ := acc.NewOptions(acc.OptimizerOptions)
		defer lr.Close()
		_ = lr.SetFloat("lr", 0.1)
		opt, err := acc.NewOptimizer(m, "adamw", lr)
		if err != nil {
			t.Fatal(err)
		}
		defer opt.Close()
		for step := int64(0); step < 4; step++ {
			adaloraStep(t, m, opt, step)
		}
		if err := m.AdaloraUpdateAndAllocate(-1); !errors.Is(err, acc.ErrInvalidArgument) {
			t.Errorf("AdaloraUpdateAndAllocate(-1): %v, want ErrInvalidArgument", err)
		}
		return n, nil
	}, "1.lora_A", "1.lora_B", "1.lora_E", "1.ranknum")
	for _, want := range []string{`"ADALORA"`, `"rank_pattern"`, `"1.lora_E"`} {
		if !strings.Contains(config, want) {
			t.Errorf("adapter_config.json lacks %s:\n%s", want, config)
		}
	}
	if strings.Contains(config, `"rank_pattern": null`) {
		t.Errorf("adapter_config.json has no rank pattern:\n%s", config)
	}
}

// adaloraStep is one step of AdaLoRA's training on the token model: the MSE loss against zeros plus
// the orthogonal regularization, the optimizer step, then the rank allocation.
func adaloraStep(t *testing.T, m *acc.Model, opt *acc.Optimizer, step int64) {
	t.Helper()
	ids, _ := acc.FromInt64s([]int64{1, 4, 2, 0}, 2, 2)
	defer ids.Close()
	target, _ := acc.FromFloat32s(make([]float32, 2*2*6), 2, 2, 6)
	defer target.Close()
	y, err := m.Forward(ids)
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	loss, err := acc.MSELoss(y, target, acc.ReductionMean)
	if err != nil {
		t.Fatal(err)
	}
	defer loss.Close()
	regularized, err := m.AdaloraLoss(loss)
	if err != nil {
		t.Fatal(err)
	}
	defer regularized.Close()
	plain, _ := loss.Item()
	total, _ := regularized.Item()
	if !(total > plain) {
		t.Errorf("step %d: regularized loss %v, not above the loss %v", step, total, plain)
	}
	if err := regularized.Backward(); err != nil {
		t.Fatal(err)
	}
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	if err := m.AdaloraUpdateAndAllocate(step); err != nil {
		t.Fatalf("step %d: %v", step, err)
	}
	if err := opt.ZeroGrad(); err != nil {
		t.Fatal(err)
	}
}

// methodOptions makes options of kind with the given values (ints, bools, strings).
func methodOptions(t *testing.T, kind acc.OptionsKind, values map[string]any) *acc.Options {
	t.Helper()
	o, err := acc.NewOptions(kind)
	if err != nil {
		t.Fatal(err)
	}
	for key, value := range values {
		switch v := value.(type) {
		case int:
			err = o.SetInt(key, int64(v))
		case float64:
			err = o.SetFloat(key, v)
		case bool:
			err = o.SetBool(key, v)
		case string:
			err = o.Set(key, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// roundTrips puts a PEFT method (add) on the token model's linear layer, drawn (or trained) so that it
// changes the outputs: its tensors adapterNames follow the layer's own, and PEFT's files round-trip.
// It returns the adapter_config.json written.
func roundTrips(t *testing.T, add func(*acc.Model) (int, error), adapterNames ...string) string {
	t.Helper()
	m := seededTokenModel(t)
	defer m.Close()
	base := tokenOutput(t, m)
	if n, err := add(m); n != 1 || err != nil {
		t.Fatalf("adding = %d, %v", n, err)
	}
	names, _ := m.ParameterNames()
	want := append([]string{"0.weight", "1.weight", "1.bias"}, adapterNames...)
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("parameters %v, want %v", names, want)
	}
	changed := tokenOutput(t, m)
	if reflect.DeepEqual(base, changed) {
		t.Fatal("the drawn adapter left the outputs as they were")
	}
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := m.SaveLora(dir); err != nil {
		t.Fatal(err)
	}
	fresh := seededTokenModel(t)
	defer fresh.Close()
	if err := fresh.LoadLora(dir); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(changed, tokenOutput(t, fresh)) {
		t.Error("the loaded adapter computes otherwise")
	}
	config, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(config)
}

// loraR2 is LoraOptions with r 2 and nn.Linear's draws for A and B (init_lora_weights false), so
// that every adapter changes the outputs from the start.
func loraR2(t *testing.T) *acc.Options {
	o, err := acc.NewOptions(acc.LoraOptions)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.SetInt("r", 2); err != nil {
		t.Fatal(err)
	}
	if err := o.Set("init_lora_weights", "false"); err != nil {
		t.Fatal(err)
	}
	return o
}

// The two linear layers in evaluation with "default" on both and "second" (kept aside) on
// `secondTargets`, and the outputs with "second" active.
func withSecondAdapter(t *testing.T, secondTargets string) (*acc.Model, []float32) {
	t.Helper()
	m := seededTwoLinears(t)
	o := loraR2(t)
	defer o.Close()
	if _, err := m.AddLora("0,1", o); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddLoraNamed("second", secondTargets, o); err != nil {
		t.Fatal(err)
	}
	if err := m.SetTraining(false); err != nil {
		t.Fatal(err)
	}
	if err := m.SetAdapter("second"); err != nil {
		t.Fatal(err)
	}
	second := outputOf(t, m)
	if err := m.SetAdapter("default"); err != nil {
		t.Fatal(err)
	}
	return m, second
}

// PEFT's merge_and_unload(adapter_names=...): an adapter kept aside, merged by name, computes as it did.
func TestNamedAdaptersMergeByName(t *testing.T) {
	m, second := withSecondAdapter(t, "1")
	defer m.Close()
	if err := m.MergeLoraAdapters([]string{"second"}); err != nil || m.LoraCount() != 0 {
		t.Fatalf("MergeLoraAdapters: %v, %d left", err, m.LoraCount())
	}
	for i, v := range outputOf(t, m) {
		if d := v - second[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("output %d: %v, the adapter's own %v", i, v, second[i])
		}
	}
	if err := m.MergeLoraAdapters([]string{"third"}); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "no adapter named 'third'") {
		t.Fatalf("MergeLoraAdapters(third) = %v", err)
	}
}

// PEFT's adapter_names: each sample of one batch computes with its own adapter ("__base__": none).
func TestNamedAdaptersMixedBatch(t *testing.T) {
	m, second := withSecondAdapter(t, "0,1")
	defer m.Close()
	x, _ := acc.FromFloat32s([]float32{0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8}, 2, 4)
	defer x.Close()
	out, err := m.ForwardAdapters([]string{"second", "second"}, x)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	y, err := out.Get(0)
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := y.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range mixed {
		if d := v - second[i]; d > 1e-6 || d < -1e-6 {
			t.Fatalf("output %d: %v, the adapter's own %v", i, v, second[i])
		}
	}
	if _, err := m.ForwardAdapters([]string{"second", "nope"}, x); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "non-existing adapter(s): nope") {
		t.Fatalf("ForwardAdapters(nope) = %v", err)
	}
}

// PEFT's several named adapters: one active, the others kept aside; switching draws nothing.
func TestNamedAdaptersSwitchAndSaveWherePeftDoes(t *testing.T) {
	m := seededTwoLinears(t)
	defer m.Close()
	o := loraR2(t)
	defer o.Close()
	base := outputOf(t, m)
	if _, err := m.AddLora("0,1", o); err != nil {
		t.Fatal(err)
	}
	first := outputOf(t, m)
	if n, err := m.AddLoraNamed("second", "1", o); n != 1 || err != nil {
		t.Fatalf("AddLoraNamed = %d, %v", n, err)
	}
	if !reflect.DeepEqual(first, outputOf(t, m)) {
		t.Error("the new adapter is not kept aside")
	}
	if err := m.SetAdapter("second"); err != nil {
		t.Fatal(err)
	}
	if name, err := m.ActiveAdapter(); name != "second" || err != nil {
		t.Fatalf("ActiveAdapter = %q, %v", name, err)
	}
	second := outputOf(t, m)
	if reflect.DeepEqual(first, second) {
		t.Error("both adapters compute alike")
	}
	if names, err := m.AdapterNames(); err != nil || !reflect.DeepEqual(names, []string{"default", "second"}) {
		t.Fatalf("AdapterNames = %v, %v", names, err)
	}
	dir := filepath.Join(t.TempDir(), "adapters")
	if err := m.SaveLora(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "second", "adapter_config.json")); err != nil {
		t.Fatal(err)
	}
	if err := m.SetAdapter("third"); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "no adapter named 'third'") {
		t.Fatalf("SetAdapter(third) = %v", err)
	}
	if err := m.DeleteAdapter("second"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, outputOf(t, m)) {
		t.Error("deleting the adapter kept aside changed the active one")
	}
	fresh := seededTwoLinears(t)
	defer fresh.Close()
	if err := fresh.LoadLoraNamed(filepath.Join(dir, "second"), "loaded"); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second, outputOf(t, fresh)) {
		t.Error("the loaded adapter computes otherwise")
	}
	// PEFT's add_weighted_adapter: "cat" of an adapter with itself, weights 1 and -1, adds nothing.
	if n, err := m.AddWeightedAdapter([]string{"default", "default"}, []float64{1, -1}, "none", "cat", 0); n != 2 || err != nil {
		t.Fatalf("AddWeightedAdapter = %d, %v", n, err)
	}
	if err := m.SetAdapter("none"); err != nil {
		t.Fatal(err)
	}
	for i, v := range outputOf(t, m) {
		if d := v - base[i]; d > 1e-6 || d < -1e-6 {
			t.Fatalf("output %d: %v, the base model's %v", i, v, base[i])
		}
	}
	// "ties" of an adapter with itself, weights 1 and 1, nothing pruned: the adapter again.
	wo, err := acc.NewOptions(acc.WeightedAdapterOptions)
	if err != nil {
		t.Fatal(err)
	}
	defer wo.Close()
	if err := wo.SetFloat("density", 1); err != nil {
		t.Fatal(err)
	}
	if n, err := m.AddWeightedAdapterWith([]string{"default", "default"}, []float64{1, 1}, "tied", "ties", wo); n != 2 || err != nil {
		t.Fatalf("AddWeightedAdapterWith = %d, %v", n, err)
	}
	if err := m.SetAdapter("tied"); err != nil {
		t.Fatal(err)
	}
	for i, v := range outputOf(t, m) {
		if d := v - first[i]; d > 1e-5 || d < -1e-5 {
			t.Fatalf("output %d: %v, the adapter's own %v", i, v, first[i])
		}
	}
	if _, err := m.AddWeightedAdapterWith([]string{"default", "default"}, []float64{1, 1}, "x", "ties", nil); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "needs a density") {
		t.Fatalf("ties without a density = %v", err)
	}
	if err := m.UnloadLora(); err != nil || m.LoraCount() != 0 {
		t.Fatalf("UnloadLora: %v, %d left", err, m.LoraCount())
	}
	if !reflect.DeepEqual(base, outputOf(t, m)) {
		t.Error("the unloaded model does not compute as its base")
	}
}

// A loader over 24 rows of 4 features (varied enough for a covariance of full rank), in batches of 6.
func rowsLoader(t *testing.T) *acc.DataLoader {
	t.Helper()
	values := make([]float32, 24*4)
	for i := range values {
		values[i] = float32((i*7)%11) - 5 + float32(i%4)*0.25
	}
	x, _ := acc.FromFloat32s(values, 24, 4)
	defer x.Close()
	ds, err := acc.DatasetFromTensors(x)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close() // the loader keeps the dataset alive
	lo, _ := acc.NewOptions(acc.DataLoaderOptions)
	defer lo.Close()
	_ = lo.SetInt("batch_size", 6)
	dl, err := acc.NewDataLoader(ds, lo)
	if err != nil {
		t.Fatal(err)
	}
	return dl
}

// EVA: adapters made with init_lora_weights "eva" take their layers' input components from a
// loader; adapters of another start are refused.
func TestInitializeLoraEvaStartsAFromTheData(t *testing.T) {
	m := seededTwoLinears(t)
	defer m.Close()
	o, _ := acc.NewOptions(acc.LoraOptions)
	defer o.Close()
	_ = o.SetInt("r", 1)
	if err := o.Set("init_lora_weights", "eva"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddLora("0,1", o); err != nil {
		t.Fatal(err)
	}
	dl := rowsLoader(t)
	defer dl.Close()
	loraA := func() (all []float32) { // every lora_A's values (EVA may take a layer's adapter away)
		names, _ := m.ParameterNames()
		for _, name := range names {
			if strings.HasSuffix(name, ".lora_A.weight") {
				all = append(all, paramValues(t, m, name)...)
			}
		}
		return all
	}
	before := loraA()
	eva, _ := acc.NewOptions(acc.EvaOptions)
	defer eva.Close()
	if err := eva.SetInt("max_batches", 500); err != nil {
		t.Fatal(err)
	}
	if n, err := m.InitializeLoraEva(dl, eva, nil); n < 1 || err != nil {
		t.Fatalf("InitializeLoraEva = %d, %v", n, err)
	}
	if reflect.DeepEqual(before, loraA()) {
		t.Error("lora_A did not take the components")
	}
	plain := seededTwoLinears(t)
	defer plain.Close()
	if _, err := plain.AddLora("0", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.InitializeLoraEva(dl, nil, nil); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "eva") {
		t.Fatalf("InitializeLoraEva on init true = %v", err)
	}
}

// CorDA: the adapters start from the weights' components along the inputs' covariance, the weights
// keeping the residual, so the model computes as before (to rounding).
func TestAddLoraCordaKeepsTheOutputs(t *testing.T) {
	m := seededTwoLinears(t)
	defer m.Close()
	before := outputOf(t, m)
	dl := rowsLoader(t)
	defer dl.Close()
	o, _ := acc.NewOptions(acc.LoraOptions)
	defer o.Close()
	_ = o.SetInt("r", 2)
	if err := o.Set("corda_method", "kpm"); err != nil {
		t.Fatal(err)
	}
	if n, err := m.AddLoraCorda("0,1", o, dl, 1); n != 2 || err != nil {
		t.Fatalf("AddLoraCorda = %d, %v", n, err)
	}
	for i, v := range outputOf(t, m) {
		if math.Abs(float64(v-before[i])) > 1e-4 {
			t.Fatalf("output %d moved from %v to %v", i, before[i], v)
		}
	}
	if _, err := m.AddLoraCorda("0", o, dl, 1); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("AddLoraCorda on an adapted model = %v", err)
	}
}

// LoRA-GA: gradients accumulated over the caller's own backward passes start the adapters, the
// weights keeping the residual, so the model computes as before (to rounding).
func TestLoraGaStartsFromTheGradients(t *testing.T) {
	m := seededTwoLinears(t)
	defer m.Close()
	before := outputOf(t, m)
	o, _ := acc.NewOptions(acc.LoraOptions)
	defer o.Close()
	_ = o.SetInt("r", 1)
	if err := m.BeginLoraGa("0,1", o); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		loss := mseOf(t, m)
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		loss.Close()
	}
	if n, err := m.AddLoraGa(); n != 2 || err != nil {
		t.Fatalf("AddLoraGa = %d, %v", n, err)
	}
	for i, v := range outputOf(t, m) {
		if math.Abs(float64(v-before[i])) > 1e-4 {
			t.Fatalf("output %d moved from %v to %v", i, before[i], v)
		}
	}
	if _, err := m.AddLoraGa(); !errors.Is(err, acc.ErrInvalidArgument) {
		t.Fatalf("AddLoraGa without BeginLoraGa = %v", err)
	}
}

// LoftQ: the weights become their NF4 approximation, the adapters start from the error; the
// quantisation takes 4 or 8 bits only.
func TestLoftqQuantisesTheWeightsAndStartsFromTheError(t *testing.T) {
	m := seededTwoLinears(t)
	defer m.Close()
	weight := paramValues(t, m, "0.weight")
	o, _ := acc.NewOptions(acc.LoraOptions)
	defer o.Close()
	_ = o.SetInt("r", 1)
	_ = o.SetString("init_lora_weights", "loftq")
	_ = o.SetInt("loftq_iter", 2)
	if n, err := m.AddLora("0,1", o); n != 2 || err != nil {
		t.Fatalf("AddLora = %d, %v", n, err)
	}
	quantised := paramValues(t, m, "0.weight")
	changed := false
	for i, v := range quantised {
		changed = changed || v != weight[i]
		if math.Abs(float64(v-weight[i])) > 0.2 {
			t.Fatalf("weight %d moved from %v to %v", i, weight[i], v)
		}
	}
	if !changed {
		t.Fatal("the weights were not quantised")
	}
	if err := o.SetInt("loftq_bits", 5); !errors.Is(err, acc.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "must be one of 4, 8") {
		t.Fatalf("loftq_bits 5 = %v", err)
	}
}
