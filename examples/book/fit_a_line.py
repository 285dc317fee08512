# ruff: noqa: UP010, UP030, UP031, UP032, B007, RUF059, RUF100, SIM113, SIM117  (the style of Fluid 1.5 scripts)
"""Paddle book chapter 1, fit_a_line: linear regression of house prices on the
UCI housing features, written as for Fluid 1.5. Only the imports differ from a
Paddle script (``paddle`` is fluid-hw's ``paddle_compat``, whose
``dataset.uci_housing`` is a small synthetic stand-in).

    python examples/book/fit_a_line.py --num_epochs 20
"""

from __future__ import print_function

import argparse
import math
import sys

import numpy

import fluid_hw as fluid
import fluid_hw.paddle_compat as paddle

BATCH_SIZE = 20


def train_test(executor, program, reader, feeder, fetch_list):
    """Mean of the fetched costs over the test reader."""
    accumulated = 1 * [0]
    count = 0
    for data_test in reader():
        outs = executor.run(program=program, feed=feeder.feed(data_test),
                            fetch_list=fetch_list)
        accumulated = [x_c[0] + x_c[1][0] for x_c in zip(accumulated, outs)]
        count += 1
    return [x_d / count for x_d in accumulated]


def train(use_cuda, params_dirname, num_epochs=100, max_steps=None, seed=None,
          learning_rate=0.001):
    """Train; return the training losses, one per step."""
    train_reader = paddle.batch(
        paddle.reader.shuffle(paddle.dataset.uci_housing.train(), buf_size=500),
        batch_size=BATCH_SIZE)
    test_reader = paddle.batch(
        paddle.reader.shuffle(paddle.dataset.uci_housing.test(), buf_size=500),
        batch_size=BATCH_SIZE)

    # feature vector of length 13
    x = fluid.layers.data(name='x', shape=[13], dtype='float32')
    y = fluid.layers.data(name='y', shape=[1], dtype='float32')

    main_program = fluid.default_main_program()
    startup_program = fluid.default_startup_program()
    if seed is not None:
        main_program.random_seed = seed
        startup_program.random_seed = seed

    y_predict = fluid.layers.fc(input=x, size=1, act=None)
    cost = fluid.layers.square_error_cost(input=y_predict, label=y)
    avg_loss = fluid.layers.mean(cost)

    test_program = main_program.clone(for_test=True)

    sgd_optimizer = fluid.optimizer.SGD(learning_rate=learning_rate)
    sgd_optimizer.minimize(avg_loss)

    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    exe = fluid.Executor(place)

    feeder = fluid.DataFeeder(place=place, feed_list=[x, y])
    exe.run(startup_program)

    exe_test = fluid.Executor(place)
    losses = []
    step = 0
    for pass_id in range(num_epochs):
        for data_train in train_reader():
            avg_loss_value, = exe.run(main_program, feed=feeder.feed(data_train),
                                      fetch_list=[avg_loss])
            losses.append(float(avg_loss_value[0]))
            if step % 10 == 0:  # record a train cost every 10 batches
                print("Train cost, Step %d, Cost %f" % (step, avg_loss_value[0]))
            if step % 100 == 0:  # record a test cost every 100 batches
                test_metics = train_test(executor=exe_test, program=test_program,
                                         reader=test_reader, fetch_list=[avg_loss],
                                         feeder=feeder)
                print("Test cost, Step %d, Cost %f" % (step, test_metics[0]))
                # If the accuracy is good enough, we can stop the training.
                if test_metics[0] < 10.0:
                    break
            step += 1
            if math.isnan(float(avg_loss_value[0])):
                sys.exit("got NaN loss, training failed.")
            if max_steps is not None and step >= max_steps:
                break
        if params_dirname is not None:
            # We can save the trained parameters for the inferences later
            fluid.io.save_inference_model(params_dirname, ['x'], [y_predict], exe)
        if max_steps is not None and step >= max_steps:
            break
    return losses


def infer(use_cuda, params_dirname):
    """Load the saved inference model; return its predictions for the first test
    batch and the true prices."""
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    infer_exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inference_program, feed_target_names,
         fetch_targets] = fluid.io.load_inference_model(params_dirname, infer_exe)
        infer_reader = paddle.batch(paddle.dataset.uci_housing.test(), batch_size=10)
        infer_data = next(infer_reader())
        infer_feat = numpy.array([data[0] for data in infer_data]).astype("float32")
        infer_label = numpy.array([data[1] for data in infer_data]).astype("float32")
        assert feed_target_names[0] == 'x'
        results = infer_exe.run(inference_program,
                                feed={feed_target_names[0]: numpy.array(infer_feat)},
                                fetch_list=fetch_targets)
        print("infer results: (House Price)")
        for idx, val in enumerate(results[0]):
            print("%d: %.2f" % (idx, val[0]))
        print("\nground truth:")
        for idx, val in enumerate(infer_label):
            print("%d: %.2f" % (idx, val[0]))
    return results[0], infer_label


def main(use_cuda, num_epochs):
    params_dirname = "fit_a_line.inference.model"
    train(use_cuda, params_dirname, num_epochs=num_epochs)
    infer(use_cuda, params_dirname)


if __name__ == '__main__':
    parser = argparse.ArgumentParser("fit_a_line")
    parser.add_argument('--use_gpu', type=bool, default=False)
    parser.add_argument('--num_epochs', type=int, default=100)
    args = parser.parse_args()
    main(use_cuda=args.use_gpu, num_epochs=args.num_epochs)
