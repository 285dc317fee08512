# ruff: noqa: UP010, UP030, UP031, UP032, B007, RUF059, RUF100, SIM113, SIM117  (the style of Fluid 1.5 scripts)
"""Paddle book chapter 2, recognize_digits: softmax regression, a multilayer
perceptron and LeNet-5 on MNIST, written as for Fluid 1.5. Only the imports differ
from a Paddle script (``paddle`` is fluid-hw's ``paddle_compat``, whose
``dataset.mnist`` is a small synthetic stand-in).

    python examples/book/recognize_digits.py --nn_type multilayer_perceptron
"""

from __future__ import print_function

import argparse

import numpy

import fluid_hw as fluid
import fluid_hw.paddle_compat as paddle

BATCH_SIZE = 64


def loss_net(hidden, label):
    prediction = fluid.layers.fc(input=hidden, size=10, act='softmax')
    loss = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_loss = fluid.layers.mean(loss)
    acc = fluid.layers.accuracy(input=prediction, label=label)
    return prediction, avg_loss, acc


def softmax_regression(img, label):
    return loss_net(img, label)


def multilayer_perceptron(img, label):
    hidden = fluid.layers.fc(input=img, size=200, act='tanh')
    hidden = fluid.layers.fc(input=hidden, size=200, act='tanh')
    return loss_net(hidden, label)


def convolutional_neural_network(img, label):
    conv_pool_1 = fluid.nets.simple_img_conv_pool(
        input=img, filter_size=5, num_filters=20, pool_size=2, pool_stride=2,
        act="relu")
    conv_pool_1 = fluid.layers.batch_norm(conv_pool_1)
    conv_pool_2 = fluid.nets.simple_img_conv_pool(
        input=conv_pool_1, filter_size=5, num_filters=50, pool_size=2,
        pool_stride=2, act="relu")
    return loss_net(conv_pool_2, label)


NETS = {
    'softmax_regression': softmax_regression,
    'multilayer_perceptron': multilayer_perceptron,
    'convolutional_neural_network': convolutional_neural_network,
}


def train(nn_type, use_cuda, save_dirname=None, num_epochs=1, max_steps=None,
          seed=None):
    """Train; return the training losses, one per step."""
    if use_cuda and not fluid.core.is_compiled_with_cuda():
        return []
    startup_program = fluid.default_startup_program()
    main_program = fluid.default_main_program()
    if seed is not None:
        startup_program.random_seed = seed
        main_program.random_seed = seed

    train_reader = paddle.batch(
        paddle.reader.shuffle(paddle.dataset.mnist.train(), buf_size=500),
        batch_size=BATCH_SIZE)
    test_reader = paddle.batch(paddle.dataset.mnist.test(), batch_size=BATCH_SIZE)

    img = fluid.layers.data(name='img', shape=[1, 28, 28], dtype='float32')
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    prediction, avg_loss, acc = NETS[nn_type](img, label)

    test_program = main_program.clone(for_test=True)
    optimizer = fluid.optimizer.Adam(learning_rate=0.001)
    optimizer.minimize(avg_loss)

    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    exe = fluid.Executor(place)
    feeder = fluid.DataFeeder(feed_list=[img, label], place=place)
    exe.run(startup_program)

    def train_test(reader, limit):
        acc_set, loss_set = [], []
        for i, test_data in enumerate(reader()):
            if limit is not None and i >= limit:
                break
            acc_np, loss_np = exe.run(program=test_program,
                                      feed=feeder.feed(test_data),
                                      fetch_list=[acc, avg_loss])
            acc_set.append(float(acc_np[0]))
            loss_set.append(float(loss_np[0]))
        return numpy.array(loss_set).mean(), numpy.array(acc_set).mean()

    losses = []
    step = 0
    for epoch_id in range(num_epochs):
        for data in train_reader():
            metrics = exe.run(main_program, feed=feeder.feed(data),
                              fetch_list=[avg_loss, acc])
            losses.append(float(metrics[0][0]))
            if step % 10 == 0:
                print("Pass %d, Epoch %d, Cost %f" % (step, epoch_id, metrics[0][0]))
            step += 1
            if max_steps is not None and step >= max_steps:
                break
        avg_loss_val, acc_val = train_test(test_reader, max_steps)
        print("Test with Epoch %d, avg_cost: %s, acc: %s" % (epoch_id, avg_loss_val,
                                                              acc_val))
        if save_dirname is not None:
            fluid.io.save_inference_model(save_dirname, ["img"], [prediction], exe)
    return losses


def infer(use_cuda, save_dirname):
    """Load the saved inference model; return its class probabilities for a few
    test images and their labels."""
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    exe = fluid.Executor(place)
    batch = next(paddle.batch(paddle.dataset.mnist.test(), batch_size=8)())
    tensor_img = numpy.array([x[0] for x in batch]).reshape(-1, 1, 28, 28)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inference_program, feed_target_names,
         fetch_targets] = fluid.io.load_inference_model(save_dirname, exe)
        results = exe.run(inference_program,
                          feed={feed_target_names[0]: tensor_img},
                          fetch_list=fetch_targets)
        lab = numpy.argsort(results)
        print("Inference results: %s" % lab[0][:, -1])
    return results[0], numpy.array([x[1] for x in batch])


def main(use_cuda, nn_type, num_epochs):
    save_dirname = "recognize_digits_" + nn_type + ".inference.model"
    train(nn_type=nn_type, use_cuda=use_cuda, save_dirname=save_dirname,
          num_epochs=num_epochs)
    infer(use_cuda=use_cuda, save_dirname=save_dirname)


if __name__ == '__main__':
    parser = argparse.ArgumentParser("mnist")
    parser.add_argument('--use_gpu', type=bool, default=False)
    parser.add_argument('--num_epochs', type=int, default=5)
    parser.add_argument('--nn_type', default='convolutional_neural_network',
                        choices=sorted(NETS))
    args = parser.parse_args()
    main(use_cuda=args.use_gpu, nn_type=args.nn_type, num_epochs=args.num_epochs)
