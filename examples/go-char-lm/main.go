// Command char_lm is examples/c/char_lm.c through the Go binding: a small GPT from a layer spec,
// trained as a character-level language model on a text file, reporting the validation perplexity
// after each epoch.
//
//	PKG_CONFIG_PATH=build/pkgconfig go run . [-text FILE] [-epochs N] [-batch-size N] [-lr X]
//	    [-context N] [-max-perplexity X]
//
// Exits 3 when the final validation perplexity is above -max-perplexity, 2 on a bad command line, 1 on
// an error.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	acc "github.com/accelerate-cpp/accelerate/go/accelerate"
)

type config struct {
	text                   string
	epochs, batch, context int
	lr, maxPerplexity      float64
}

func main() {
	var cfg config
	flag.StringVar(&cfg.text, "text", "/usr/share/common-licenses/GPL-3", "the text to learn")
	flag.IntVar(&cfg.epochs, "epochs", 8, "epochs")
	flag.IntVar(&cfg.batch, "batch-size", 8, "windows per batch and process")
	flag.IntVar(&cfg.context, "context", 64, "characters per window")
	flag.Float64Var(&cfg.lr, "lr", 3e-3, "AdamW's learning rate")
	flag.Float64Var(&cfg.maxPerplexity, "max-perplexity", 0, "exit 3 above this final perplexity (0: never)")
	parseFlags()
	// The C example's limits (examples/c/char_lm.c), refused before anything is read or trained.
	switch {
	case flag.NArg() > 0:
		usageError("unexpected argument %q (flags come first: -name value)", flag.Arg(0))
	case cfg.epochs < 1 || cfg.epochs > math.MaxInt32:
		usageError("-epochs must be from 1 to %d, got %d", math.MaxInt32, cfg.epochs)
	case cfg.batch < 1 || cfg.batch > math.MaxInt32:
		usageError("-batch-size must be from 1 to %d, got %d", math.MaxInt32, cfg.batch)
	case cfg.context < 2 || cfg.context > math.MaxInt32:
		usageError("-context must be from 2 to %d, got %d", math.MaxInt32, cfg.context)
	case math.IsNaN(cfg.lr) || math.IsInf(cfg.lr, 0):
		usageError("-lr must be a finite number, got %v", cfg.lr)
	case math.IsNaN(cfg.maxPerplexity) || math.IsInf(cfg.maxPerplexity, 0):
		usageError("-max-perplexity must be a finite number, got %v", cfg.maxPerplexity)
	}
	ppl, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	if cfg.maxPerplexity > 0 && !(ppl <= cfg.maxPerplexity) {
		os.Exit(3)
	}
}

// parseFlags parses the command line as flag.Parse does (a bad value: the error and the flags on
// stderr, exit 2), except that -h and -help print the flags on stdout and exit 0.
func parseFlags() {
	flag.CommandLine.Init(os.Args[0], flag.ContinueOnError)
	flag.CommandLine.SetOutput(io.Discard)
	err := flag.CommandLine.Parse(os.Args[1:])
	if err == flag.ErrHelp {
		flag.CommandLine.SetOutput(os.Stdout)
		flag.Usage()
		os.Exit(0)
	}
	flag.CommandLine.SetOutput(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		flag.Usage()
		os.Exit(2)
	}
}

// usageError reports a bad command line in one line on stderr and exits 2.
func usageError(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", filepath.Base(os.Args[0]), fmt.Sprintf(format, args...))
	os.Exit(2)
}

// windows cuts ids[first:last] into inputs of `context` ids and their targets, shifted by one.
func windows(ids []int64, first, last, context int) (*acc.Dataset, error) {
	count := (last - first) / context
	x := make([]int64, 0, count*context)
	y := make([]int64, 0, count*context)
	for w := 0; w < count; w++ {
		start := first + w*context
		x = append(x, ids[start:start+context]...)
		y = append(y, ids[start+1:start+context+1]...)
	}
	xt, err := acc.FromInt64s(x, int64(count), int64(context))
	if err != nil {
		return nil, err
	}
	defer xt.Close()
	yt, err := acc.FromInt64s(y, int64(count), int64(context))
	if err != nil {
		return nil, err
	}
	defer yt.Close()
	return acc.DatasetFromTensors(xt, yt)
}

// batchLoss is the mean next-character cross-entropy of a batch (logits [B, T, V] flattened, as
// in PyTorch). Its tensors belong to the caller's scope.
func batchLoss(model *acc.Model, batch *acc.TensorList, vocab int64, grad bool) (*acc.Tensor, error) {
	x, err := batch.Get(0)
	if err != nil {
		return nil, err
	}
	y, err := batch.Get(1)
	if err != nil {
		return nil, err
	}
	forward := model.Forward
	if !grad {
		forward = model.ForwardNoGrad
	}
	logits, err := forward(x)
	if err != nil {
		return nil, err
	}
	flat, err := logits.Reshape(-1, vocab)
	if err != nil {
		return nil, err
	}
	targets, err := y.Reshape(-1)
	if err != nil {
		return nil, err
	}
	return acc.CrossEntropy(flat, targets, acc.ReductionMean, 0)
}

// perplexity is exp of the mean validation loss over every process's batches.
func perplexity(a *acc.Accelerator, model *acc.Model, loader *acc.DataLoader, vocab int64) (float64, error) {
	var sum, batches float64
	if err := model.SetTraining(false); err != nil {
		return 0, err
	}
	err := loader.ForEach(func(batch *acc.TensorList) error {
		return acc.WithScope(func() error {
			loss, err := batchLoss(model, batch, vocab, false)
			if err != nil {
				return err
			}
			value, err := loss.Item()
			sum, batches = sum+value, batches+1
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	if err := model.SetTraining(true); err != nil {
		return 0, err
	}
	var totals []float64
	err = acc.WithScope(func() error {
		local, err := acc.FromFloat64s([]float64{sum, batches}, 2)
		if err != nil {
			return err
		}
		total, err := a.Reduce(local, acc.ReductionSum, "validation loss")
		if err != nil {
			return err
		}
		totals, err = total.Float64s()
		return err
	})
	if err != nil || totals[1] == 0 {
		return math.Inf(1), err
	}
	return math.Exp(totals[0] / totals[1]), nil
}

func run(cfg config) (float64, error) {
	text, err := os.ReadFile(cfg.text)
	if err != nil {
		return 0, err
	}
	// The vocabulary: the bytes the text uses, numbered in byte order.
	var code [256]int64
	var used [256]bool
	for _, b := range text {
		used[b] = true
	}
	vocab := int64(0)
	for b := range code {
		if used[b] {
			code[b], vocab = vocab, vocab+1
		}
	}
	ids := make([]int64, len(text))
	for i, b := range text {
		ids[i] = code[b]
	}
	split := len(ids) - len(ids)/10
	if split/cfg.context < 1 || (len(ids)-split-1)/cfg.context < 1 {
		return 0, fmt.Errorf("the text is too short")
	}

	var closers []interface{ Close() error }
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i].Close()
		}
	}()
	keep := func(c interface{ Close() error }) { closers = append(closers, c) }

	accOpts, err := acc.NewOptions(acc.AcceleratorOptions)
	if err != nil {
		return 0, err
	}
	keep(accOpts)
	if err := accOpts.SetInt("seed", 7); err != nil {
		return 0, err
	}
	a, err := acc.NewAccelerator(accOpts)
	if err != nil {
		return 0, err
	}
	keep(a)
	train, err := windows(ids, 0, split-1, cfg.context)
	if err != nil {
		return 0, err
	}
	keep(train)
	valid, err := windows(ids, split, len(ids)-1, cfg.context)
	if err != nil {
		return 0, err
	}
	keep(valid)
	loaderOpts, err := acc.NewOptions(acc.DataLoaderOptions)
	if err != nil {
		return 0, err
	}
	keep(loaderOpts)
	if err := loaderOpts.SetInt("batch_size", int64(cfg.batch)); err != nil {
		return 0, err
	}
	if err := loaderOpts.SetBool("shuffle", true); err != nil {
		return 0, err
	}
	trainLoader, err := acc.NewDataLoader(train, loaderOpts)
	if err != nil {
		return 0, err
	}
	keep(trainLoader)
	if err := loaderOpts.SetBool("shuffle", false); err != nil {
		return 0, err
	}
	validLoader, err := acc.NewDataLoader(valid, loaderOpts)
	if err != nil {
		return 0, err
	}
	keep(validLoader)

	// A GPT from a layer spec: ids [B, T] in, logits [B, T, V] out; the head reuses layer 0's weight.
	block := `{"type":"transformer_encoder_layer","d_model":64,"nhead":4,"dim_feedforward":256,"dropout":0.1,
	           "batch_first":true,"norm_first":true,"causal":true}`
	spec := fmt.Sprintf(`[{"type":"embedding","num_embeddings":%d,"embedding_dim":64},
	  {"type":"positional_embedding","num_embeddings":%d,"embedding_dim":64}, %s, %s,
	  {"type":"rmsnorm","normalized_shape":64}, {"type":"tied_linear","tie_to":0}]`, vocab, cfg.context, block, block)
	model, err := acc.ModelFromSpec(spec)
	if err != nil {
		return 0, err
	}
	keep(model)
	optOpts, err := acc.NewOptions(acc.OptimizerOptions)
	if err != nil {
		return 0, err
	}
	keep(optOpts)
	if err := optOpts.SetFloat("lr", cfg.lr); err != nil {
		return 0, err
	}
	opt, err := acc.NewOptimizer(model, "adamw", optOpts)
	if err != nil {
		return 0, err
	}
	keep(opt)
	// The fine-tuning convention in one line: no weight decay for biases and norm weights.
	noDecay, err := acc.NewOptions(acc.OptimizerOptions)
	if err != nil {
		return 0, err
	}
	keep(noDecay)
	if err := noDecay.SetFloat("weight_decay", 0); err != nil {
		return 0, err
	}
	if _, err := opt.AddParamGroupMatching("*.bias,*norm*.weight", noDecay); err != nil {
		return 0, err
	}

	if model, err = a.PrepareModel(model, acc.PlacementDefault); err != nil {
		return 0, err
	}
	keep(model)
	if opt, err = a.PrepareOptimizer(opt, acc.PlacementDefault); err != nil {
		return 0, err
	}
	keep(opt)
	if trainLoader, err = a.PrepareDataLoader(trainLoader, acc.PlacementDefault); err != nil {
		return 0, err
	}
	keep(trainLoader)
	if validLoader, err = a.PrepareDataLoader(validLoader, acc.PlacementDefault); err != nil {
		return 0, err
	}
	keep(validLoader)
	if err := a.Print(fmt.Sprintf("%d characters, a vocabulary of %d; guessing has perplexity %d", len(text), vocab, vocab)); err != nil {
		return 0, err
	}

	ppl := math.Inf(1)
	for epoch := 0; epoch < cfg.epochs; epoch++ {
		var lossSum, batches float64
		err := trainLoader.ForEach(func(batch *acc.TensorList) error {
			return acc.WithScope(func() error {
				loss, err := batchLoss(model, batch, vocab, true)
				if err != nil {
					return err
				}
				if err := a.Backward(loss); err != nil {
					return err
				}
				if _, err := a.ClipGradNorm(model, 1.0, 2.0); err != nil {
					return err
				}
				if err := opt.Step(); err != nil {
					return err
				}
				if err := opt.ZeroGrad(); err != nil {
					return err
				}
				value, err := loss.Item()
				lossSum, batches = lossSum+value, batches+1
				return err
			})
		})
		if err != nil {
			return 0, err
		}
		if ppl, err = perplexity(a, model, validLoader, vocab); err != nil {
			return 0, err
		}
		line := fmt.Sprintf("epoch %d/%d: training loss %.3f, validation perplexity %.2f", epoch+1, cfg.epochs,
			lossSum/math.Max(batches, 1), ppl)
		if err := a.Print(line); err != nil {
			return 0, err
		}
	}
	return ppl, nil
}
