# ruff: noqa: UP010, UP030, UP031, UP032, B007, RUF059, RUF100, SIM113, SIM117  (the style of Fluid 1.5 scripts)
"""Paddle book chapter 6, understand_sentiment: IMDB review classification with
a text convolution network, a dynamic LSTM and a stacked bidirectional LSTM, on
LoD (variable-length) word sequences, written as for Fluid 1.5 (the book's
train_conv.py, train_dyn_rnn.py and train_stacked_lstm.py share this training
code). Only the imports differ from a Paddle script (``paddle`` is fluid-hw's
``paddle_compat``, whose ``dataset.imdb`` is a small synthetic stand-in).

    python examples/book/understand_sentiment.py --net conv
"""

from __future__ import print_function

import argparse
import math
import sys

import numpy as np

import fluid_hw as fluid
import fluid_hw.paddle_compat as paddle

CLASS_DIM = 2
EMB_DIM = 128
HID_DIM = 512
LSTM_SIZE = 128
STACKED_NUM = 3
BATCH_SIZE = 128


def convolution_net(data, input_dim, class_dim, emb_dim, hid_dim):
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    conv_3 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=3,
                                           act="tanh", pool_type="sqrt")
    conv_4 = fluid.nets.sequence_conv_pool(input=emb, num_filters=hid_dim, filter_size=4,
                                           act="tanh", pool_type="sqrt")
    prediction = fluid.layers.fc(input=[conv_3, conv_4], size=class_dim, act="softmax")
    return prediction


def dynamic_rnn_lstm(data, input_dim, class_dim, emb_dim, lstm_size):
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    sentence = fluid.layers.fc(input=emb, size=lstm_size * 4, act='tanh')
    lstm, _ = fluid.layers.dynamic_lstm(sentence, size=lstm_size * 4)
    last = fluid.layers.sequence_last_step(lstm)
    prediction = fluid.layers.fc(input=last, size=class_dim, act="softmax")
    return prediction


def stacked_lstm_net(data, input_dim, class_dim, emb_dim, hid_dim, stacked_num):
    assert stacked_num % 2 == 1
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    fc1 = fluid.layers.fc(input=emb, size=hid_dim)
    lstm1, cell1 = fluid.layers.dynamic_lstm(input=fc1, size=hid_dim)
    inputs = [fc1, lstm1]
    for i in range(2, stacked_num + 1):
        fc = fluid.layers.fc(input=inputs, size=hid_dim)
        lstm, cell = fluid.layers.dynamic_lstm(input=fc, size=hid_dim,
                                               is_reverse=(i % 2) == 0)
        inputs = [fc, lstm]
    fc_last = fluid.layers.sequence_pool(input=inputs[0], pool_type='max')
    lstm_last = fluid.layers.sequence_pool(input=inputs[1], pool_type='max')
    prediction = fluid.layers.fc(input=[fc_last, lstm_last], size=class_dim,
                                 act='softmax')
    return prediction


def inference_program(word_dict, net='conv'):
    data = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    dict_dim = len(word_dict)
    if net == 'dyn_rnn':
        return dynamic_rnn_lstm(data, dict_dim, CLASS_DIM, EMB_DIM, LSTM_SIZE)
    if net == 'stacked_lstm':
        return stacked_lstm_net(data, dict_dim, CLASS_DIM, EMB_DIM, HID_DIM, STACKED_NUM)
    return convolution_net(data, dict_dim, CLASS_DIM, EMB_DIM, HID_DIM)


def train_program(prediction):
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    cost = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_cost = fluid.layers.mean(cost)
    accuracy = fluid.layers.accuracy(input=prediction, label=label)
    return [avg_cost, accuracy]


def optimizer_func():
    return fluid.optimizer.Adagrad(learning_rate=0.002)


def train(use_cuda, params_dirname, net='conv', num_epochs=1, batch_size=BATCH_SIZE,
          max_steps=None, seed=None):
    """Train; return the training losses, one per step."""
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    print("Loading IMDB word dict....")
    word_dict = paddle.dataset.imdb.word_dict()
    print("Reading training data....")
    train_reader = paddle.batch(
        paddle.reader.shuffle(paddle.dataset.imdb.train(word_dict), buf_size=25000),
        batch_size=batch_size)
    print("Reading testing data....")
    test_reader = paddle.batch(paddle.dataset.imdb.test(word_dict), batch_size=batch_size)

    feed_order = ['words', 'label']
    main_program = fluid.default_main_program()
    star_program = fluid.default_startup_program()
    if seed is not None:
        main_program.random_seed = seed
        star_program.random_seed = seed

    prediction = inference_program(word_dict, net)
    train_func_outputs = train_program(prediction)
    avg_cost = train_func_outputs[0]
    test_program = main_program.clone(for_test=True)
    sgd_optimizer = optimizer_func()
    sgd_optimizer.minimize(avg_cost)
    exe = fluid.Executor(place)

    def train_test(program, reader, limit):
        count = 0
        feed_var_list = [program.global_block().var(name) for name in feed_order]
        feeder_test = fluid.DataFeeder(feed_list=feed_var_list, place=place)
        test_exe = fluid.Executor(place)
        accumulated = len(train_func_outputs) * [0]
        for tid, test_data in enumerate(reader()):
            if limit is not None and tid >= limit:
                break
            avg_cost_np = test_exe.run(program=program, feed=feeder_test.feed(test_data),
                                       fetch_list=train_func_outputs)
            accumulated = [x[0] + x[1][0] for x in zip(accumulated, avg_cost_np)]
            count += 1
        return [x / count for x in accumulated]

    feed_var_list_loop = [main_program.global_block().var(name) for name in feed_order]
    feeder = fluid.DataFeeder(feed_list=feed_var_list_loop, place=place)
    exe.run(star_program)

    losses = []
    step = 0
    for epoch_id in range(num_epochs):
        for step_id, data in enumerate(train_reader()):
            metrics = exe.run(main_program, feed=feeder.feed(data),
                              fetch_list=[var.name for var in train_func_outputs])
            losses.append(float(metrics[0][0]))
            print("step: {0}, Metrics {1}".format(step_id, list(map(np.array, metrics))))
            if (step_id + 1) % 10 == 0:
                avg_cost_test, acc_test = train_test(test_program, test_reader, max_steps)
                print('Step {0}, Test Loss {1:0.2}, Acc {2:0.2}'.format(
                    step_id, avg_cost_test, acc_test))
            if math.isnan(float(metrics[0][0])):
                sys.exit("got NaN loss, training failed.")
            step += 1
            if max_steps is not None and step >= max_steps:
                break
        if params_dirname is not None:
            fluid.io.save_inference_model(params_dirname, ["words"], prediction, exe)
    return losses


def infer(use_cuda, params_dirname=None):
    """Load the saved inference model; return its class probabilities for three
    reviews built from the dictionary."""
    place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
    word_dict = paddle.dataset.imdb.word_dict()
    exe = fluid.Executor(place)
    inference_scope = fluid.core.Scope()
    with fluid.scope_guard(inference_scope):
        [inferencer, feed_target_names,
         fetch_targets] = fluid.io.load_inference_model(params_dirname, exe)
        # Three reviews of different lengths, as word ids: one LoDTensor whose
        # recursive sequence lengths give each review's length.
        reviews_str = ['w3 w5 w9 w200 w7', 'w70 w80 w300 w400', 'w1 w2 w3 w500 w600 w90']
        reviews = [c.split() for c in reviews_str]
        UNK = word_dict['<unk>']
        lod = []
        for c in reviews:
            lod.append([np.int64(word_dict.get(words, UNK)) for words in c])
        base_shape = [[len(c) for c in lod]]
        tensor_words = fluid.create_lod_tensor(lod, base_shape, place)
        assert feed_target_names[0] == "words"
        results = exe.run(inferencer, feed={feed_target_names[0]: tensor_words},
                          fetch_list=fetch_targets, return_numpy=False)
        np_data = np.array(results[0])
        for i, r in enumerate(np_data):
            print("Predict probability of ", r[0], " to be positive and ", r[1],
                  " to be negative for review \'", reviews_str[i], "\'")
    return np_data


def main(use_cuda, net, num_epochs):
    params_dirname = "understand_sentiment_" + net + ".inference.model"
    train(use_cuda, params_dirname, net=net, num_epochs=num_epochs)
    infer(use_cuda, params_dirname)


if __name__ == '__main__':
    parser = argparse.ArgumentParser("understand_sentiment")
    parser.add_argument('--use_gpu', type=int, default=0)
    parser.add_argument('--num_epochs', type=int, default=1)
    parser.add_argument('--net', default='conv', choices=['conv', 'dyn_rnn', 'stacked_lstm'])
    args = parser.parse_args()
    main(use_cuda=args.use_gpu, net=args.net, num_epochs=args.num_epochs)
